"""The policy (specs/policy.yaml) as an immutable value, and the rule lookup (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from controller.core.model.analysis import parse_analysis
from controller.core.model.guards import Budget, Freeze, SchedulerGuard, Window
from controller.core.model.load import AssetConsumers
from controller.core.model.notify_policy import NO_NOTIFY, NotifyPolicy, parse_notify
from controller.core.model.oidc import StopWorkflow, parse_stop_workflow
from controller.core.model.run_notes import AirflowNotes, parse_notes
from controller.core.model.scope import Scope
from controller.core.model.stages import PRODUCTION, Environment

NO_SCHEDULER_GUARD = SchedulerGuard()


class DriftMode(StrEnum):
    REPORT = "report"
    HEAL = "heal"


@dataclass(frozen=True, slots=True)
class Rule:
    dags: tuple[str, ...]
    approvers: tuple[str, ...] | None = None
    min_approvers: int = 1
    min_approvers_for_completed: int | None = None
    max_active_runs_limit: int | None = None
    max_runs: int | None = None
    max_backfills: int | None = None  # the most sub-ranges a `select` spec may split into (None: the default)
    merge_sub_ranges: bool = False  # beyond it, join the closest sub-ranges (re-running on-target intervals)
    index: int = 0
    chunk_default: int | None = None  # the chunk size of specs that set none (above `chunk_required_above` runs)
    chunk_max: int | None = None  # the largest `execution.chunk_runs` a spec may set
    chunk_required_above: int = 0
    require_canary_for_completed: bool = False
    asset_consumers: AssetConsumers | None = None  # the DAGs a backfill's asset events trigger: warn, or
    # require the spec's downstream to name them
    require_rehearsal: bool = False  # a spec on these DAGs must set `rehearsal`
    require_rollback_note: bool = False  # a spec on these DAGs must set `rollback`

    def matches(self, dag_id: str) -> bool:
        return any(fnmatchcase(dag_id, glob) for glob in self.dags)


@dataclass(frozen=True, slots=True)
class Policy:
    ticket_pattern: str | None = None
    require_expected_runs: bool = False
    max_active_runs_limit: int | None = None
    drift: DriftMode = DriftMode.REPORT
    author_logins: tuple[tuple[str, str], ...] = ()
    rules: tuple[Rule, ...] = ()
    path: str | None = None
    allow_future_partitions: bool = False  # a partitioned DAG's range may reach past now (Airflow runs those)
    notify: NotifyPolicy = NO_NOTIFY  # webhook receivers and the events each is sent
    downstream: tuple[Budget, ...] = ()  # capacity budgets of shared systems
    freezes: tuple[Freeze, ...] = ()
    windows: tuple[Window, ...] = ()  # default run windows; empty: always
    scheduler_guard: SchedulerGuard = NO_SCHEDULER_GUARD
    environments: tuple[Environment, ...] = ()  # empty: one Airflow, production, as before
    verification_dags: tuple[str, ...] = ()  # the DAGs a spec's `verify` / `publish` may name
    oncall: tuple[str, ...] = ()  # logins that may stop anything and never lift (lower case)
    expect_every: timedelta | None = None  # the dead-man's check: a good pass is expected this often
    ping_url_env: str | None = None  # the variable holding the URL called after each good pass
    stop_workflow: StopWorkflow | None = None  # the workflow a `source: workflow` stop proves it ran in (OIDC)
    # a start with no reviewed pull request behind it is refused at reconcile (None: the key is missing, a warning)
    require_reviewed_merge: bool | None = None
    airflow_notes: AirflowNotes | None = None  # the DAGs whose managed runs carry a run note (None: off)
    # the DAGs this specs repository may touch (None: the key is missing, a warning)
    scope: Scope | None = None
    drain_dags: tuple[str, ...] = ()  # globs of the DAGs a spec may drain (`drain.allowed_dags`, Airflow 3.4+)

    def may_drain(self, dag_id: str) -> bool:
        return any(fnmatchcase(dag_id, glob) for glob in self.drain_dags)

    def environment(self, name: str) -> Environment | None:
        return next((e for e in self.environments if e.name == name), None)

    @property
    def rehearsal_environment(self) -> Environment | None:
        """Where production rehearses (None: it does not)."""
        production = self.environment(PRODUCTION)
        return (
            None if production is None or production.rehearse_in is None else self.environment(production.rehearse_in)
        )

    @property
    def budgets(self) -> dict[str, Budget]:
        return {b.name: b for b in self.downstream}

    def rule_for(self, dag_id: str) -> Rule | None:
        """The first rule whose globs match `dag_id`."""
        return next((rule for rule in self.rules if rule.matches(dag_id)), None)

    def login_for(self, email: str) -> str | None:
        return dict(self.author_logins).get(email.lower())


DEFAULT_POLICY = Policy()


def parse_policy(data: dict[str, Any], path: str) -> Policy:
    """Build the value from a document that passed the policy schema."""
    return Policy(
        ticket_pattern=data.get("ticket_pattern"),
        require_expected_runs=data.get("require_expected_runs", False),
        max_active_runs_limit=data.get("max_active_runs_limit"),
        drift=DriftMode(data.get("drift", "report")),
        author_logins=tuple(sorted((k.lower(), v) for k, v in data.get("author_logins", {}).items())),
        rules=tuple(_rule(raw, i) for i, raw in enumerate(data.get("rules", []))),
        path=path,
        allow_future_partitions=data.get("allow_future_partitions", False),
        notify=parse_notify(data.get("notify")),
        downstream=tuple(
            Budget(
                name,
                raw["max_active_runs"],
                tuple(raw.get("owners", ())),
                parse_analysis(name, raw.get("analysis")),
                tuple(raw.get("dags", ())),
            )
            for name, raw in data.get("downstream", {}).items()
        ),
        freezes=tuple(
            Freeze(parse_instant(raw["from"]), parse_instant(raw["to"]), raw["reason"])
            for raw in data.get("freeze", [])
        ),
        windows=parse_windows(data.get("windows", [])),
        scheduler_guard=SchedulerGuard(
            bool(data.get("scheduler_guard", {}).get("pause_when_unhealthy", False)),
            data.get("scheduler_guard", {}).get("max_heartbeat_age_s"),
        ),
        environments=tuple(_environment(name, raw) for name, raw in data.get("environments", {}).items()),
        verification_dags=tuple(data.get("verification", {}).get("allowed_dags", ())),
        oncall=tuple(login.lower() for login in data.get("oncall", ())),
        expect_every=parse_span(data.get("liveness", {}).get("expect_every")),
        ping_url_env=data.get("liveness", {}).get("ping_url_env"),
        stop_workflow=parse_stop_workflow(data.get("stop_workflow")),
        require_reviewed_merge=data.get("require_reviewed_merge"),
        airflow_notes=parse_notes(data.get("airflow_notes")),
        scope=_scope(data.get("scope")),
        drain_dags=tuple(data.get("drain", {}).get("allowed_dags", ())),
    )


def _scope(raw: dict[str, Any] | None) -> Scope | None:
    return None if raw is None else Scope(tuple(raw.get("dags", ())), tuple(raw.get("tags", ())))


_SPANS = {"m": "minutes", "h": "hours", "d": "days"}


def parse_span(text: str | None) -> timedelta | None:
    """`15m`, `1h`, `2d` as a timedelta (the schema checked the shape); None for None."""
    return None if text is None else timedelta(**{_SPANS[text[-1]]: int(text[:-1])})


def _environment(name: str, raw: dict[str, Any]) -> Environment:
    return Environment(
        name,
        raw.get("airflow_url_env"),
        raw.get("token_env"),
        raw.get("username_env"),
        raw.get("password_env"),
        raw.get("rehearse_in"),
    )


def parse_windows(raw: list[dict[str, Any]]) -> tuple[Window, ...]:
    return tuple(Window(tuple(w["days"]), w["start"], w["end"], w["timezone"]) for w in raw)


def parse_instant(text: str) -> datetime:
    """An RFC 3339 date-time with offset (the schema checked it) as a UTC instant."""
    return datetime.fromisoformat(text.upper().replace("Z", "+00:00")).astimezone(UTC)


def _rule(raw: dict[str, Any], index: int) -> Rule:
    approvers = raw.get("approvers")
    return Rule(
        dags=tuple(raw["dags"]),
        approvers=None if approvers is None else tuple(approvers),
        min_approvers=raw.get("min_approvers", 1),
        min_approvers_for_completed=raw.get("min_approvers_for_completed"),
        max_active_runs_limit=raw.get("max_active_runs_limit"),
        max_runs=raw.get("max_runs"),
        max_backfills=raw.get("max_backfills"),
        merge_sub_ranges=raw.get("merge_sub_ranges", False),
        index=index,
        chunk_default=raw.get("chunk_runs", {}).get("default"),
        chunk_max=raw.get("chunk_runs", {}).get("max"),
        chunk_required_above=raw.get("chunk_runs", {}).get("required_above", 0),
        require_canary_for_completed=raw.get("require_canary_for_completed", False),
        asset_consumers=raw.get("asset_consumers"),
        require_rehearsal=raw.get("require_rehearsal", False),
        require_rollback_note=raw.get("require_rollback_note", False),
    )
