"""`backfillctl validate` and `backfillctl new`: what they check beyond the files (Airflow's DAGs, the store's stops)
and the scaffold they write."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from controller.adapters import files
from controller.commands.reconcile.specfiles import with_diagnostics
from controller.commands.runtime.validator import build_validator
from controller.core.checks.names import check_names_in_tree
from controller.core.checks.result import ValidationResult
from controller.core.model.spec import BackfillSpec, SourceFile, parse_date
from controller.errors import AirflowError, AirflowNotFound, InvalidSpecs, UsageError

if TYPE_CHECKING:  # the PR, Airflow and scaffold checks import their modules when they run (a faster start)
    from controller.adapters.airflow import AirflowClient
    from controller.core.checks.dags import Unknown
    from controller.core.model.airflow import DagInfo
    from controller.core.model.capabilities import Capabilities
    from controller.core.render.scaffold import NewSpec

log = logging.getLogger(__name__)


def check_resumes_in_store(result: ValidationResult, store_url: str) -> ValidationResult:
    """Each `resume` judged by the store when there is one (`core.checks.resumes`): a named stop that never held the
    spec is a warning listing those that did; a Halted spec's resume is none. No store (a pull request's check): the
    resume is judged by the file alone, and a resume naming a stop says the store was not read."""
    resuming = [item for item in result.loaded if item.spec.resume is not None]
    if not resuming:
        return result
    # the store itself, not `runtime.session.open_store` (httpx): `validate` runs in pre-commit, and reads only
    from controller.adapters.store import Store  # noqa: PLC0415 - SQLAlchemy only for a spec with a resume
    from controller.core.checks.resumes import HeldBy, judge_resumes  # noqa: PLC0415
    from controller.core.model.binding import Phase  # noqa: PLC0415
    from controller.errors import StoreError  # noqa: PLC0415

    try:
        with Store(store_url, read_only=True) as store:
            held = {
                i.spec.name: [
                    HeldBy(h.stop.id, f"{h.stop.kind.value} {h.stop.target}", h.lifted_at is None)
                    for h in store.stop_history(i.spec.name, i.spec.downstream)
                ]
                for i in resuming
            }
            halted = frozenset(name for name, b in store.bindings().items() if b.phase is Phase.HALTED)
    except StoreError:
        if not any(i.spec.resumed_stops for i in resuming):
            return result
        skipped = "that the stop each resume names held its spec (no store at BACKFILLCTL_STORE_URL)"
        return replace(result, skipped=(*result.skipped, skipped))
    return replace(result, diagnostics=judge_resumes(result.loaded, result.diagnostics, held, halted))


DagLookup = Callable[[str], "DagInfo"]  # raises AirflowNotFound for an unknown DAG


def check_dags_in_airflow(
    result: ValidationResult, connect: Callable[[], AirflowClient], now: datetime
) -> ValidationResult:
    """`check_dags` against the Airflow `connect` opens (`session.make_client`); one that fails its preflight
    makes every DAG unknown."""
    try:
        client = connect()
    except AirflowError as exc:
        failure = exc

        def unreachable(_dag_id: str) -> DagInfo:
            raise failure

        return check_dags(result, unreachable, now)
    with client:
        checked = check_dags(result, lambda dag_id: client.dag(dag_id, with_tasks=False), now, client.dag_ids)
        return check_release(check_consumers(checked, client), client.capabilities)


def check_release(result: ValidationResult, caps: Capabilities) -> ValidationResult:
    """What a spec asks that this Airflow release cannot do (`drain_dag` before 3.4), at the field."""
    from controller.core.checks.dags import check_against_release  # noqa: PLC0415

    return with_diagnostics(result, [d for item in result.loaded for d in check_against_release(item, caps)])


def check_consumers(result: ValidationResult, client: AirflowClient) -> ValidationResult:
    """The policy rule `asset_consumers`: one assets read per DAG whose rule sets it."""
    from controller.commands.reconcile.observe import dag_load  # noqa: PLC0415
    from controller.core.checks.load_rules import check_asset_consumers, wants_consumers  # noqa: PLC0415

    wanted = [item for item in result.loaded if wants_consumers(item, result.policy)]
    loads = {dag_id: dag_load(client, dag_id, None) for dag_id in sorted({i.spec.dag_id for i in wanted})}
    return with_diagnostics(
        result, [d for i in wanted for d in check_asset_consumers(i, loads[i.spec.dag_id], result.policy)]
    )


def check_dags(
    result: ValidationResult, lookup: DagLookup, now: datetime, listing: Callable[[], set[str]] | None = None
) -> ValidationResult:
    """With Airflow configured: every spec's DAG exists and its schedule can be backfilled as asked, and its verify
    and publish DAGs exist (one details call per DAG). An unreachable Airflow is a warning: validate itself does not
    need Airflow. A DAG that does not exist gets the closest ids of Airflow's DAG `listing` (read only then), never
    a guess."""
    from controller.core.checks.dags import (  # noqa: PLC0415
        check_against_dag,
        check_stage_dags,
        superseded_warnings,
    )

    infos: dict[str, DagInfo | Unknown | None] = {}
    for item in result.loaded:
        for dag_id in _dag_ids(item.spec):
            if dag_id not in infos:
                infos[dag_id] = _look_up(lookup, dag_id)
    similar = _similar_ids([d for d, info in infos.items() if info is None], listing)
    found = [
        d
        for item in result.loaded
        for d in check_against_dag(item, infos[item.spec.dag_id], result.policy, now, similar.get(item.spec.dag_id, ()))
    ]
    found += [d for item in result.loaded for d in check_stage_dags(item, infos, similar)]
    replaced = {
        d for item in result.loaded for d in superseded_warnings(item, infos[item.spec.dag_id], result.diagnostics)
    }
    kept = replace(result, diagnostics=tuple(d for d in result.diagnostics if d not in replaced))
    return with_diagnostics(kept, found)


def _dag_ids(spec: BackfillSpec) -> list[str]:
    """The DAGs a spec runs in Airflow: its own, then its verify and publish DAGs."""
    stages = (spec.verify, spec.publish)
    return [spec.dag_id, *(stage.dag_id for stage in stages if stage is not None)]


def _look_up(lookup: DagLookup, dag_id: str) -> DagInfo | Unknown | None:
    from controller.core.checks.dags import Unknown  # noqa: PLC0415

    try:
        return lookup(dag_id)
    except AirflowNotFound:
        return None
    except AirflowError as exc:
        return Unknown(exc.message)


def _similar_ids(missing: Sequence[str], listing: Callable[[], set[str]] | None) -> dict[str, tuple[str, ...]]:
    """Each missing DAG id → the existing ids closest to it, from Airflow's DAG list (one listing, only when a DAG
    is missing); a listing that fails suggests nothing (the missing DAG is still an error)."""
    if not missing or listing is None:
        return {}
    from controller.core.plan.world import closest_ids  # noqa: PLC0415

    try:
        known = listing()
    except AirflowError as exc:
        log.info("DAG listing unavailable (%s); no suggestion for a missing DAG", exc.message)
        return {}
    return {dag_id: closest_ids(dag_id, known) for dag_id in missing}


def preview_new(new: NewSpec, specs_dir: Path, now: datetime) -> tuple[Path, str, ValidationResult]:
    """The new spec's path, its text, and what validation says of it in the tree (nothing is written)."""
    from controller.core.render.scaffold import scaffold  # noqa: PLC0415

    check_new(new)
    path = specs_dir / f"{new.name}.yaml"
    text = scaffold(new)
    validator = build_validator()
    tree = files.collect([], specs_dir)
    preview = validator.validate(
        [SourceFile(files.display(path), new.name, text.encode())], now=now, policy_file=tree.policy
    )
    return (
        path,
        text,
        with_diagnostics(preview, list(check_names_in_tree(preview.loaded, files.names_in_tree(specs_dir)))),
    )


def create_spec(new: NewSpec, specs_dir: Path, now: datetime) -> tuple[Path, ValidationResult]:
    """Write `specs_dir/<name>.yaml` only if it validates: an invalid file in the tree stops every reconcile."""
    path, text, preview = preview_new(new, specs_dir, now)
    refuse_invalid(preview)
    files.write_new(path, text)
    return path, preview


def refuse_invalid(preview: ValidationResult) -> None:
    if preview.errors:
        raise InvalidSpecs(
            f"not written: the spec would be invalid: {preview.errors[0].text()}",
            details=tuple(d.text() for d in preview.errors[1:]),
            hint="fix the options that give these values; `backfillctl new --help` lists them",
        )


def check_new(new: NewSpec) -> None:
    """Refuse a name or date that cannot make a spec before anything is written (exit 2)."""
    pattern = files.load_schema("backfill-spec.schema.json")["properties"]["name"]["pattern"]
    if not re.fullmatch(pattern, new.name):
        raise UsageError(
            f"invalid spec name {new.name!r}: lower-case letters, digits, '-', '_' and '.', starting with a "
            "letter or digit, at most 100 characters",
            hint="the name is also the file name under the specs folder, e.g. orders-2025q1-fix",
        )
    for option, value in (("--from", new.from_date), ("--to", new.to_date)):
        try:
            parse_date(value)
        except ValueError as exc:
            raise UsageError(
                f"{option} {value!r} is not a date: {exc}",
                hint="use YYYY-MM-DD (00:00 UTC) or an RFC 3339 date-time with an offset, e.g. 2025-01-01T00:00:00Z",
            ) from None
