"""`backfillctl new`: write a spec that validates, with expected_runs from Airflow's dry run when it is reachable."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

from controller.commands.observe import Observer
from controller.commands.reconcile import make_client
from controller.commands.settings import Settings
from controller.commands.validate import create_spec, preview_new, refuse_invalid
from controller.core.plan import DagObservation
from controller.core.scaffold import DryRunCount, NewSpec
from controller.core.validation import ValidationResult
from controller.errors import AirflowError, AirflowNotFound, ControllerError, InvalidSpecs

FALLBACK = "or pass --expected-runs N (the reviewed upper bound) to write the spec without a dry run"


def new_spec(new: NewSpec, settings: Settings, now: datetime) -> tuple[Path, ValidationResult, NewSpec]:
    """Write the spec (never an invalid one); with BACKFILLCTL_AIRFLOW_URL set and no --expected-runs, its
    expected_runs is what Airflow's dry run counts, so reconcile does not refuse it for a guess."""
    if new.expected_runs is None and settings.airflow_url:
        new = replace(new, counted=count_runs(new, settings, now))
    path, result = create_spec(new, settings.specs_dir, now)
    return path, result, new


def count_runs(new: NewSpec, settings: Settings, now: datetime) -> DryRunCount:
    # 1 meets every rule on expected_runs: this preview reports the other options' errors before Airflow is asked
    _path, _text, preview = preview_new(replace(new, expected_runs=1), settings.specs_dir, now)
    refuse_invalid(preview)
    spec = preview.specs[0]
    with make_client(settings) as client:
        try:
            info = client.dag(spec.dag_id, with_tasks=False)
        except AirflowNotFound:
            raise InvalidSpecs(
                f"not written: DAG {spec.dag_id!r} does not exist in Airflow", hint=f"check --dag-id, {FALLBACK}"
            ) from None
        except AirflowError as exc:
            raise ControllerError(f"not written: {exc.message}", hint=exc.hint or FALLBACK) from None
        dry = Observer(client).dry_run(spec, {spec.dag_id: DagObservation(spec.dag_id, info)})
    if dry.error is not None:
        raise InvalidSpecs(f"not written: Airflow's dry run refuses the spec: {dry.error}", hint=FALLBACK)
    if not dry.dates:
        raise InvalidSpecs(
            f"not written: Airflow's dry run counts no run to create: every date in the range has a run that "
            f"reprocess_behavior {spec.reprocess_behavior.value} keeps",
            hint="choose --reprocess failed or completed, or another range",
        )
    return DryRunCount(len(dry.dates), dry.in_range, now.date().isoformat())
