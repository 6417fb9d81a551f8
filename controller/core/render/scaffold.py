"""Text of a new spec for `backfillctl new` (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from controller.core.model.spec import ReprocessBehavior, Select
from controller.core.rules.follow_up import Retry

DATE_TO_HELP = "a date is 00:00 UTC of that day: an hourly DAG's last run is then 00:00, not 23:00"


@dataclass(frozen=True, slots=True)
class DryRunCount:
    """What Airflow's dry run counted for the new spec, and when (for the comment beside expected_runs)."""

    runs: int
    in_range: int | None
    day: str  # YYYY-MM-DD (UTC)


@dataclass(frozen=True, slots=True)
class NewSpec:
    name: str
    dag_id: str
    from_date: str
    to_date: str
    reprocess: ReprocessBehavior
    max_active_runs: int
    requested_by: str
    ticket: str
    approvers: tuple[str, ...]
    expected_runs: int | None = None
    reason: str = ""
    counted: DryRunCount | None = None  # Airflow's dry run, when expected_runs was not given
    retry: Retry | None = None  # --retry-failed-of: the finished spec whose failed runs this one re-runs
    downstream: tuple[str, ...] = ()  # --downstream: the systems that will feel the load (their owners approve)
    select: Select | None = None  # --select-latest: the DAG's latest version in Airflow when the spec was written
    select_day: str = ""  # the day that version was read


def _text(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's): any text stays one value."""
    return json.dumps(value, ensure_ascii=False)


def _downstream_line(systems: tuple[str, ...]) -> str:
    if not systems:
        return "# downstream: []             # systems that will feel the load"
    return f"downstream: [{', '.join(_text(s) for s in systems)}]   # systems that will feel the load (owners approve)"


def expected_runs_line(new: NewSpec) -> str:
    if new.retry is not None and new.expected_runs == new.retry.failed:
        return (
            f"expected_runs: {new.expected_runs}             # the failed runs {new.retry.original} ended with (the "
            "store's final counts): reconcile refuses more"
        )
    if new.expected_runs is not None:
        return f"expected_runs: {new.expected_runs}             # the reviewed upper bound of runs (--expected-runs)"
    if new.counted is not None:
        in_range = "" if new.counted.in_range is None else f" of {new.counted.in_range} in range"
        return (
            f"expected_runs: {new.counted.runs}             # Airflow's dry run on {new.counted.day}: "
            f"{new.counted.runs} run(s) to create{in_range}"
        )
    return (
        "# expected_runs: N            # the most runs you expect (reconcile refuses more): with "
        "BACKFILLCTL_AIRFLOW_URL set, `backfillctl plan` shows Airflow's dry-run count"
    )


def retry_lines(retry: Retry | None) -> str:
    """The follow-up's link to its original, and what its range is."""
    if retry is None:
        return ""
    span = (
        "the original's whole range (the store does not list every failed date)"
        if retry.whole_range
        else "from the first to the last failed run"
    )
    return (
        f"# Re-runs the failed runs of {retry.original}, {span}; reprocess_behavior failed keeps the successful ones.\n"
    )


def _select_line(new: NewSpec) -> str:
    if new.select is None or new.select.code_version is None:
        return ""
    return (
        f"select: {{code_version: {new.select.code_version}}}   # re-run only what other code made: the DAG's latest "
        f"version in Airflow on {new.select_day}\n"
    )


def _retry_field(retry: Retry | None) -> str:
    return "" if retry is None else f"retry_of: {retry.original}             # its change record links to this spec\n"


def scaffold(new: NewSpec) -> str:
    approvers = ", ".join(_text(a) for a in new.approvers)
    to_note = "inclusive" if "T" in new.to_date else f"inclusive; {DATE_TO_HELP}"
    return f"""\
# Backfill spec written by `backfillctl new`: check it with `backfillctl validate`, preview it with `backfillctl plan`.
{retry_lines(new.retry)}version: 1
name: {new.name}                 # must equal the file name
{_retry_field(new.retry)}dag_id: {_text(new.dag_id)}
from_date: {_text(new.from_date)}           # inclusive; a date means 00:00 UTC
to_date: {_text(new.to_date)}             # {to_note}
reprocess_behavior: {new.reprocess.value}        # none | failed | completed: which existing runs to re-run
{_select_line(new)}max_active_runs: {new.max_active_runs}             # runs of this backfill at once
run_backwards: false
# dag_run_conf: {{}}            # conf for every run, checked against the DAG's params
{expected_runs_line(new)}
ticket: {_text(new.ticket)}
reason: {_text(new.reason)}
requested_by: {_text(new.requested_by)}
approvers: [{approvers}]   # who must approve the pull request (not requested_by)
{_downstream_line(new.downstream)}
"""
