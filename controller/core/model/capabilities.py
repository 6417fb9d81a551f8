"""What one Airflow release's REST API and scheduler do, from the version it reports (pure).

One declaration per fact, each with the release it landed in (read from the sources of every
apache-airflow-core release 3.0.0 … 3.3.2 and of 3.4.0b2, and checked against real 3.1.8, 3.2.2, 3.3.2 and
3.4.0b2 by the contract tests).  The client reads `/api/v2/version` once and asks these, never the version string:
FastAPI ignores a query parameter a route does not declare, so a filter sent to a release without it
answers unfiltered, and a body field a release does not know is a 422.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from packaging.version import InvalidVersion, Version

SUPPORTED = "3.1, 3.2 or 3.3"  # the lines backfillctl is tested on (every patch release of each)
OLDEST = Version("3.1.0")
NEWEST_LINE = (3, 3)  # the newest supported line
NEWEST_KNOWN = Version("3.3.2")  # the newest supported release (tests and a client that never asked use its API)
# Preview lines: accepted with a warning (no override), their new capabilities used; a line becomes supported
# when the every-line suite passes on its final release. Line -> the release it was tested on.
PREVIEW = {(3, 4): "3.4.0b2"}
# the newest release whose sources these facts were read from
NEWEST_READ = max([str(NEWEST_KNOWN), *PREVIEW.values()], key=Version)
# above the newest supported and preview lines: untested, refused unless BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW=1
ALLOW_UNTESTED = "BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW"


def _landed(release: str, what: str) -> Any:
    """A capability the release `release` added (true from it on)."""
    return field(default=False, metadata={"since": Version(release), "what": what})


def _defect(since: str, fixed: str, what: str) -> Any:
    """A known Airflow defect present from `since` until the release `fixed`."""
    return field(default=False, metadata={"since": Version(since), "fixed": Version(fixed), "what": what})


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The API one server has; build it with `capabilities_of`."""

    version: str  # as the server reports it, e.g. "3.1.8+astro.1"
    # --- create / dry-run body
    run_on_latest_version: bool = _landed("3.1.6", "create body field run_on_latest_version (a 422 before)")
    null_dag_run_conf: bool = _landed("3.2.2", "create body dag_run_conf: null (a 422 before)")
    # --- GET /dags/{id}/dagRuns filters (ignored, not refused, before)
    duration_filter: bool = _landed("3.2.0", "dagRuns filters duration_gte / duration_lte")
    conf_contains_filter: bool = _landed("3.2.0", "dagRuns filter conf_contains")
    partition_key_filter: bool = _landed("3.2.0", "dagRuns filter partition_key_pattern")
    cursor_pagination: bool = _landed("3.2.2", "dagRuns cursor pagination")
    partition_date_filter: bool = _landed("3.3.1", "dagRuns filters partition_date_gte / partition_date_lte")
    # --- DAG fields and timetables
    partitioned_dags: bool = _landed("3.2.0", "partitioned timetables: DAG timetable_partitioned, dry-run partitions")
    allowed_run_types: bool = _landed("3.2.0", "DAG field allowed_run_types")
    timetable_periodic: bool = _landed("3.3.0", "DAG field timetable_periodic")
    is_backfillable: bool = _landed("3.3.0", "DAG field is_backfillable")
    rerun_with_latest_version: bool = _landed("3.3.0", "DAG field rerun_with_latest_version (the create's fallback)")
    run_partition_date: bool = _landed("3.3.0", "DAG run field partition_date")
    # --- scheduler behaviour
    rerun_takes_conf: bool = _landed("3.2.2", "a re-run takes the backfill's dag_run_conf (#64939)")
    init_cutoff: bool = _landed("3.2.2", "a backfill is not marked complete while its runs are created (#62561)")
    rerun_on_latest_by_default: bool = _landed("3.1.6", "re-runs use the latest DAG version unless told otherwise")
    # --- 3.4: a backfill's slots, draining, stricter conf
    backfill_slots: bool = _landed("3.4.0", "GET /backfills/{id}/dag_runs: every slot, with why one was skipped")
    drain_dag: bool = _landed("3.4.0", "create body field drain_dag (PR #72407; a 422 before)")
    reserved_conf_refused: bool = _landed("3.4.0", "dag_run_conf with a reserved serialisation key: a 422")
    user_display_name: bool = _landed("3.4.0", "triggering_user_name is the display name, not the login")
    backfills_not_starved: bool = _landed("3.4.0", "backfill runs not ordered behind other runs (PR #72730)")
    # --- the UI
    backfill_page: bool = _landed("3.4.0", "a UI page for one backfill, /dags/{dag_id}/backfills/{id} (PR #70159)")
    empty_range_orphan: bool = _defect(
        "3.2.0", "3.3.1", "a create with no runs answers 500 and leaves an active backfill row behind"
    )


def capabilities_of(version: Version, reported: str | None = None) -> Capabilities:
    """Each fact of `version`: a release at or after its landing (and before its fix, for a defect)."""
    facts: dict[str, bool] = {}
    for f in fields(Capabilities):
        if "since" in f.metadata:
            fixed = f.metadata.get("fixed")
            facts[f.name] = _at_least(version, f.metadata["since"]) and (fixed is None or not _at_least(version, fixed))
    return Capabilities(reported or str(version), **facts)


def _at_least(version: Version, release: Version) -> bool:
    """On the release numbers only: a vendor build (`3.1.8+astro.1`) or a release candidate of a
    release has what the release has (its code is the release's)."""
    return Version(version.base_version) >= release


# Query parameters of GET /dags/{id}/dagRuns that older releases do not declare (and so ignore), with the
# capability that says the server has them; every other parameter backfillctl sends exists from 3.1.0.
RUN_FILTERS = {
    "duration_gte": "duration_filter",
    "duration_lte": "duration_filter",
    "conf_contains": "conf_contains_filter",
    "partition_key_pattern": "partition_key_filter",
    "cursor": "cursor_pagination",
    "partition_date_gte": "partition_date_filter",
    "partition_date_lte": "partition_date_filter",
}


def has_filter(caps: Capabilities, name: str) -> bool:
    """Whether the server filters by query parameter `name` (one backfillctl sends)."""
    capability = RUN_FILTERS.get(name)
    return capability is None or bool(getattr(caps, capability))


class Support(StrEnum):
    SUPPORTED = "supported"
    PREVIEW = "preview"  # a new line tested on a pre-release: accepted with a warning
    UNTESTED = "untested"  # a newer line than the tested ones: refused unless the user opts in
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Verdict:
    support: Support
    message: str = ""
    capabilities: Capabilities | None = None


# why a line is refused, said once; 3.0.x has its own reasons
_TOO_OLD_3_0 = (
    "3.0.x cannot be backfilled safely: its reprocessing rewrote other DAGs' runs at the same dates "
    "(3.0.0-3.0.1), asset-triggered DAGs get an empty backfill, and its API has no run_on_latest_version, "
    "no duration or conf filters and no triggering user"
)


def judge(reported: str) -> Verdict:
    """The verdict on a server that reports version `reported` (PEP 440; vendor suffixes allowed)."""
    try:
        version = Version(reported)
    except InvalidVersion:
        why = f"the server reports version {reported or 'unknown'!r}, which is not a PEP 440 version"
        return Verdict(Support.REFUSED, why)
    line = tuple(version.release[:2])
    if line < (3, 0):
        return Verdict(Support.REFUSED, f"Airflow {reported} is not supported: backfillctl needs Airflow {SUPPORTED}")
    if line < OLDEST.release[:2]:
        why = f"Airflow {reported} is not supported: backfillctl needs Airflow {SUPPORTED}, because {_TOO_OLD_3_0}"
        return Verdict(Support.REFUSED, why)
    caps = capabilities_of(version, reported)
    if line in PREVIEW:
        why = (
            f"Airflow {reported}: the {line[0]}.{line[1]} line is a preview in backfillctl (tested on "
            f"{PREVIEW[line]}; supported: {SUPPORTED})"
        )
        return Verdict(Support.PREVIEW, why, caps)
    if line > max([NEWEST_LINE, *PREVIEW]):
        why = f"Airflow {reported} is newer than the releases backfillctl is tested on ({_tested()})"
        return Verdict(Support.UNTESTED, why, caps)
    return Verdict(Support.SUPPORTED, capabilities=caps)


def _tested() -> str:
    previews = ", ".join(f"{tested} as a preview" for tested in PREVIEW.values())
    return SUPPORTED + (f"; {previews}" if previews else "")


def newest() -> Capabilities:
    """Every capability the newest known release has (tests and a client that never asked)."""
    return capabilities_of(NEWEST_KNOWN)


def run_on_latest(caps: Capabilities, asked: bool | None, dag_default: bool | None = None) -> bool | None:
    """The `run_on_latest_version` a create or dry run sends: the spec's; else, from 3.3.0, the DAG's own
    `rerun_with_latest_version` (what Airflow itself would fall back to); else true (the API's default from
    3.1.6 through 3.2.x and 3.3's last fallback). Always explicit, so that no line's default decides; None
    where the release has no such field (3.1.0-3.1.5, where re-runs keep their DAG version)."""
    if not caps.run_on_latest_version:
        return None
    if asked is not None:
        return asked
    return dag_default if dag_default is not None and caps.rerun_with_latest_version else True


def unsupported_request(
    caps: Capabilities, asked: bool | None, *, drain: bool = False, select: bool = False
) -> str | None:
    """Why this release cannot do what the spec asks (of re-runs, a drain, or a selection by code), or None."""
    if select and not caps.run_on_latest_version:
        return (
            f"select needs Airflow 3.1.6 or newer (run_on_latest_version); Airflow {caps.version} re-runs each run on "
            "the DAG version it first ran with, so no selected interval would move to the target (remove select, "
            "or upgrade Airflow)"
        )
    if drain and not caps.drain_dag:
        return (
            f"drain_dag: true needs Airflow 3.4 or newer; Airflow {caps.version} cannot keep the DAG's scheduled "
            "runs from being created while the backfill runs (remove the field, or upgrade Airflow)"
        )
    if asked and not caps.run_on_latest_version:
        return (
            f"run_on_latest_version: true needs Airflow 3.1.6 or newer; Airflow {caps.version} re-runs each "
            "run on the DAG version it first ran with (remove the field, or upgrade Airflow)"
        )
    return None


def rerun_code(caps: Capabilities, asked: bool | None, dag_default: bool | None = None) -> str:
    """Which code the backfill's runs will use, in the plan's words (saying so when the DAG's own
    `rerun_with_latest_version` decided)."""
    resolved = run_on_latest(caps, asked, dag_default)
    by_dag = asked is None and dag_default is not None and caps.rerun_with_latest_version
    if resolved is False:
        return "new runs: the latest DAG version; re-runs: the DAG version each run first ran with" + (
            " (the DAG's rerun_with_latest_version: false)" if by_dag else ""
        )
    if caps.run_on_latest_version:
        source = ", the DAG's rerun_with_latest_version" if by_dag else ""
        return f"every run: the latest DAG version (run_on_latest_version: true{source})"
    return (
        f"new runs: the latest DAG version; re-runs: the DAG version each run first ran with "
        f"(Airflow {caps.version} has no run_on_latest_version)"
    )
