"""`select` in a spec (pure): only on a spec that re-runs completed runs. The Airflow line is checked with Airflow
(`checks/dags.check_against_release`, and the plan)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic
from controller.core.model.policy import Policy
from controller.core.model.spec import ReprocessBehavior


def check_select(item: LoadedSpec, _policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """`select` narrows a spec that re-runs every finished run: with `none` or `failed` Airflow would skip the
    off-target intervals that succeeded, so the selection could not be made."""
    spec = item.spec
    if spec.select is None:
        return
    if spec.run_on_latest_version is False:
        yield Diagnostic(
            item.at("run_on_latest_version"),
            "run_on_latest_version: false contradicts select: a selected interval re-run on the code it first ran with "
            "never moves to the target",
            "remove run_on_latest_version (select sends true)",
        )
    if spec.drain_dag:
        yield Diagnostic(
            item.at("drain_dag"),
            "drain_dag cannot be used with select: each sub-range's backfill would pause the DAG when it ends, and the "
            "paused DAG would block the next",
            "remove drain_dag",
        )
    if spec.reprocess_behavior is ReprocessBehavior.COMPLETED:
        return
    yield Diagnostic(
        item.at("select"),
        f"select needs reprocess_behavior: completed (this spec says {spec.reprocess_behavior.value}): the intervals "
        "whose latest run succeeded on other code are re-run only by a completed backfill",
        "set reprocess_behavior: completed, or remove select",
    )
