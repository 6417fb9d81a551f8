"""`backfillctl new`: write a spec that validates, with expected_runs from Airflow's dry run when it is reachable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.adapters.gitsource import GitSource
from controller.commands.reconcile.dryrun import DryRunner
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.runtime.environments import production_settings
from controller.commands.runtime.session import make_client
from controller.commands.runtime.settings import Settings
from controller.commands.verbs.audit import stored_bindings
from controller.commands.verbs.validate import create_spec, preview_new, refuse_invalid
from controller.core.checks.result import ValidationResult
from controller.core.model.spec import ReprocessBehavior
from controller.core.plan.world import DagObservation
from controller.core.render.scaffold import DryRunCount, NewSpec
from controller.core.rules.follow_up import retry_of
from controller.errors import AirflowError, AirflowNotFound, ControllerError, InvalidSpecs, UsageError

FALLBACK = "fix what Airflow says and run `backfillctl new` again: expected_runs comes from its dry run"


def new_spec(new: NewSpec, settings: Settings, now: datetime) -> tuple[Path, ValidationResult, NewSpec]:
    """Write the spec (never an invalid one); with BACKFILLCTL_AIRFLOW_URL set and no --expected-runs, its
    expected_runs is what Airflow's dry run counts, so reconcile does not refuse it for a guess."""
    if new.expected_runs is None and settings.airflow_url:
        new = replace(new, counted=count_runs(new, settings, now))
    path, result = create_spec(new, settings.specs_dir, now)
    return path, result, new


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
        try:
            info = client.dag(spec.dag_id, with_tasks=False)
        except AirflowNotFound:
            raise InvalidSpecs(
                f"not written: DAG {spec.dag_id!r} does not exist in Airflow",
                hint="check --dag-id: the DAG must exist in the Airflow BACKFILLCTL_AIRFLOW_URL names",
            ) from None
        except AirflowError as exc:
            raise ControllerError(f"not written: {exc.message}", hint=exc.hint or FALLBACK) from None
        dry = DryRunner(client).dry_run(spec, {spec.dag_id: DagObservation(spec.dag_id, info)})
    if dry.error is not None:
        raise InvalidSpecs(f"not written: Airflow's dry run refuses the spec: {dry.error}", hint=FALLBACK)
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
