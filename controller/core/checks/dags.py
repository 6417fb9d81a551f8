"""The rules for a spec against its DAG in Airflow (pure): `validate` with Airflow configured."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.checks.scope_checks import check_scope_tags, tag_skipped
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.model.airflow import DagInfo
from controller.core.model.capabilities import Capabilities, unsupported_request
from controller.core.model.policy import Policy
from controller.core.model.spec import format_utc
from controller.core.rules.schedules import FUTURE_HINT, future_partitions, unbackfillable


class Unknown:
    """A DAG whose details could not be read (Airflow unreachable, refused): `message` says why."""

    def __init__(self, message: str) -> None:
        self.message = message


def check_against_dag(
    item: LoadedSpec, info: DagInfo | Unknown | None, policy: Policy, now: datetime, similar: Sequence[str] = ()
) -> Iterator[Diagnostic]:
    """`validate` with Airflow configured: the DAG exists, its schedule can be backfilled, and a partitioned
    DAG's range does not reach past `now` (unless the policy allows it). `info` None: the DAG was not found;
    `similar`: the ids Airflow's DAG list holds that are closest to it (a typo's likely fix)."""
    spec = item.spec
    if isinstance(info, Unknown):
        yield Diagnostic(
            item.at("dag_id"),
            f"could not check DAG {spec.dag_id!r} in Airflow: {info.message}",
            "plan and reconcile check it again",
            Severity.WARNING,
        )
        return
    if info is None:
        yield Diagnostic(
            item.at("dag_id"),
            f"DAG {spec.dag_id!r} does not exist in Airflow"
            + (f"; did you mean {' or '.join(repr(i) for i in similar)}?" if similar else ""),
            "check the dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)",
        )
        return
    yield from check_scope_tags(item, info, policy)
    refusal = unbackfillable(info)
    if refusal is not None:
        yield Diagnostic(item.at("dag_id"), refusal, "only DAGs with a periodic schedule can be backfilled")
    future = future_partitions(spec, info, policy, now)
    if future is not None:
        yield Diagnostic(item.at("to_date"), future, FUTURE_HINT)
    elif info.partitioned and spec.to_date > now:
        yield Diagnostic(
            item.at("to_date"),
            f"to_date {format_utc(spec.to_date)} is in the future and {spec.dag_id} is a partitioned DAG: Airflow "
            "will create runs for partitions that have not happened yet (the policy allows it)",
            None,
            Severity.WARNING,
        )


def check_against_release(item: LoadedSpec, caps: Capabilities) -> Iterator[Diagnostic]:
    """`validate` with Airflow configured: a field the server's release cannot act on (`drain_dag` before 3.4,
    `select` before 3.1.6)."""
    if item.spec.drain_dag and (refusal := unsupported_request(caps, None, drain=True)) is not None:
        yield Diagnostic(item.at("drain_dag"), refusal, "the create would be refused: plan and reconcile say so too")
    if item.spec.select is not None and (refusal := unsupported_request(caps, None, select=True)) is not None:
        yield Diagnostic(item.at("select"), refusal, "the create would be refused: plan and reconcile say so too")


def check_stage_dags(
    item: LoadedSpec, infos: Mapping[str, DagInfo | Unknown | None], similar: Mapping[str, Sequence[str]]
) -> Iterator[Diagnostic]:
    """`validate` with Airflow configured: the spec's verify and publish DAGs exist there, like its `dag_id`
    (`infos` by dag_id, None: not found; `similar`: the closest existing ids of a missing one)."""
    for field, stage in (("verify", item.spec.verify), ("publish", item.spec.publish)):
        if stage is None:
            continue
        info, at = infos.get(stage.dag_id), item.at(field, "dag_id")
        if isinstance(info, Unknown):
            message = f"could not check {field} DAG {stage.dag_id!r} in Airflow: {info.message}"
            yield Diagnostic(at, message, "plan and reconcile check it again", Severity.WARNING)
        elif info is None:
            guess = similar.get(stage.dag_id, ())
            yield Diagnostic(
                at,
                f"{field} DAG {stage.dag_id!r} does not exist in Airflow"
                + (f"; did you mean {' or '.join(repr(i) for i in guess)}?" if guess else ""),
                f"check {field}.dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)",
            )
        elif info.is_paused:
            yield Diagnostic(
                at,
                f"{field} DAG {stage.dag_id!r} is paused in Airflow: its run would not start, which fails the "
                + ("verification" if field == "verify" else "publish"),
                f"unpause {stage.dag_id} before the spec reaches that stage",
                Severity.WARNING,
            )


def superseded_warnings(
    item: LoadedSpec, info: DagInfo | Unknown | None, found: Sequence[Diagnostic]
) -> set[Diagnostic]:
    """The offline warning "Airflow only creates runs whose interval has already ended" is wrong for a
    partitioned DAG; once its details are known, the partition rules above replace it. So is the scope's "tag check
    skipped" once the DAG's tags are read."""
    if not isinstance(info, DagInfo):
        return set()
    tagged = tag_skipped(item, found) if info.tags is not None else set()
    if not info.partitioned:
        return tagged
    path = item.spec.path  # the file's own warnings first: a validated spec's document is read again only if needed
    mine = [
        d for d in found if d.location.source == path and not d.is_error and "interval has already ended" in d.message
    ]
    if not mine:
        return tagged
    where = item.at("to_date")
    return tagged | {d for d in mine if d.location == where}
