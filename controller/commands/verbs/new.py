"""`backfillctl new`: write a spec that validates, with expected_runs from Airflow's dry run when it is reachable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.adapters.airflow import AirflowClient
from controller.adapters.gitsource import GitSource
from controller.commands.reconcile.dryrun import DryRunner
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.runtime.environments import production_settings
from controller.commands.runtime.session import make_client
from controller.commands.runtime.settings import Settings
from controller.commands.verbs.audit import stored_bindings
from controller.commands.verbs.validate import check_new, create_spec, preview_new, refuse_invalid
from controller.core.checks.result import ValidationResult
from controller.core.model.airflow import DagInfo
from controller.core.model.spec import ReprocessBehavior, Select
from controller.core.plan.world import DagObservation
from controller.core.render.scaffold import DryRunCount, NewSpec
from controller.core.rules.follow_up import retry_of
from controller.errors import AirflowError, AirflowNotFound, ConfigError, ControllerError, InvalidSpecs, UsageError

FALLBACK = "fix what Airflow says and run `backfillctl new` again: expected_runs comes from its dry run"


def new_spec(
    new: NewSpec, settings: Settings, now: datetime, *, select_latest: bool = False
) -> tuple[Path, ValidationResult, NewSpec]:
    """Write the spec (never an invalid one); with BACKFILLCTL_AIRFLOW_URL set and no --expected-runs, its
    expected_runs is what Airflow's dry run counts, so reconcile does not refuse it for a guess. `select_latest`:
    it re-runs only what other code made than the DAG's latest version in Airflow now (`select: {code_version}`)."""
    if select_latest:
        check_new(new)  # a name or date that cannot make a spec is said before Airflow is asked
        new = replace(new, select=latest_code(new, settings), select_day=now.date().isoformat())
    if new.expected_runs is None and settings.airflow_url:
        new = replace(new, counted=count_runs(new, settings, now))
    path, result = create_spec(new, settings.specs_dir, now)
    return path, result, new


def latest_code(new: NewSpec, settings: Settings) -> Select:
    """The DAG's latest version in Airflow, as the target of `select` (one details read)."""
    if new.reprocess is not ReprocessBehavior.COMPLETED:
        raise UsageError(
            f"--select-latest needs --reprocess completed (not {new.reprocess.value}): a selection narrows a spec that "
            "re-runs every interval to those other code made",
            hint="pass --reprocess completed",
        )
    production = production_settings(settings)  # production's Airflow as the policy names it
    if not production.airflow_url:
        raise ConfigError(
            "--select-latest needs BACKFILLCTL_AIRFLOW_URL: the target is the DAG's latest version in Airflow",
            hint="set BACKFILLCTL_AIRFLOW_URL (and its credentials), or write `select: {code_version: N}` yourself",
        )
    with make_client(production) as client:
        info = _dag(client, new.dag_id)
    if info.latest_version is None:
        raise InvalidSpecs(
            f"not written: Airflow names no version of DAG {new.dag_id!r} (its details have no latest_dag_version)",
            hint="let the DAG processor parse the DAG, then run `backfillctl new` again",
        )
    return Select(code_version=info.latest_version.number)


def _dag(client: AirflowClient, dag_id: str) -> DagInfo:
    try:
        return client.dag(dag_id, with_tasks=False)
    except AirflowNotFound:
        raise InvalidSpecs(
            f"not written: DAG {dag_id!r} does not exist in Airflow",
            hint="check --dag-id: the DAG must exist in the Airflow BACKFILLCTL_AIRFLOW_URL names",
        ) from None
    except AirflowError as exc:
        raise ControllerError(f"not written: {exc.message}", hint=exc.hint or FALLBACK) from None


def retry_spec(  # noqa: PLR0917 - the follow-up's own choices beside the original's
    settings: Settings,
    original: str,
    name: str,
    requested_by: str,
    max_active_runs: int | None,
    choices: Mapping[str, Any],
    now: datetime,
) -> NewSpec:
    """The follow-up of a finished spec from the tree and the store's final counts (`choices`: ticket, reason,
    approvers given on the command line, else the original's)."""
    specs = validate_paths([], settings.specs_dir, now).specs
    spec = next((s for s in specs if s.name == original), None)
    if spec is None:
        raise UsageError(
            f"--retry-failed-of {original}: no spec named {original!r} under {settings.specs_dir}",
            hint="name the finished spec whose failed runs to retry (its file name)",
        )
    retry = retry_of(spec, stored_bindings(settings).get(original))
    return NewSpec(
        name=name,
        dag_id=retry.dag_id,
        from_date=retry.from_date,
        to_date=retry.to_date,
        reprocess=ReprocessBehavior.FAILED,
        max_active_runs=max_active_runs or spec.max_active_runs,
        requested_by=requested_by,
        ticket=choices.get("ticket") or spec.ticket,
        approvers=tuple(choices.get("approvers") or spec.approvers),
        expected_runs=retry.failed,
        reason=choices.get("reason") or retry.reason,
        retry=retry,
    )


def count_runs(new: NewSpec, settings: Settings, now: datetime) -> DryRunCount:
    # 1 meets every rule on expected_runs: this preview reports the other options' errors before Airflow is asked
    _path, _text, preview = preview_new(replace(new, expected_runs=1), settings.specs_dir, now)
    refuse_invalid(preview)
    spec = preview.specs[0]
    with make_client(production_settings(settings)) as client:  # production's Airflow as the policy names it
        info = _dag(client, spec.dag_id)
        dry = DryRunner(client).dry_run(spec, {spec.dag_id: DagObservation(spec.dag_id, info)})
    if dry.error is not None:
        raise InvalidSpecs(f"not written: Airflow's dry run refuses the spec: {dry.error}", hint=FALLBACK)
    if spec.select is not None and dry.selection is None:
        raise InvalidSpecs(
            "not written: the selection is not known: the range holds more runs than one read takes (1,000), or "
            "its runs could not be read",
            hint="narrow the range (--from, --to), or give --expected-runs",
        )
    if dry.selection is not None:  # a select spec's runs are its selected intervals
        if not dry.selection.selected:
            raise InvalidSpecs(
                f"not written: nothing to re-run: {dry.selection.text()}",
                hint="every interval in the range already ran on the DAG's latest version",
            )
        return DryRunCount(len(dry.selection.selected), dry.selection.intervals, now.date().isoformat())
    if not dry.dates:
        raise InvalidSpecs(
            f"not written: Airflow's dry run counts no run to create: every date in the range has a run that "
            f"reprocess_behavior {spec.reprocess_behavior.value} keeps",
            hint="choose --reprocess failed or completed, or another range",
        )
    return DryRunCount(len(dry.dates), dry.in_range, now.date().isoformat())


def requester(settings: Settings) -> tuple[str, str]:
    """Who asks, when --requested-by is not given, and where that came from: BACKFILLCTL_ACTOR, else git's
    user.name (the command says it: a requester is a reviewed fact, never a silent guess); a usage error when
    neither is known."""
    actor, source = settings.environ.get("BACKFILLCTL_ACTOR", "").strip(), "BACKFILLCTL_ACTOR"
    git = GitSource(settings.specs_dir)
    for option in ("github.user", "user.name") if not actor else ():  # a login first (hub's and gh's convention)
        actor, source = git.config(*option.split(".")) or "", f"git config {option}"
        if actor:
            break
    if not actor:
        raise UsageError(
            "new needs --requested-by: neither BACKFILLCTL_ACTOR nor git config github.user or user.name says who asks",
            hint="pass --requested-by LOGIN (who asks for the backfill; reviewers read it)",
        )
    return actor, source
