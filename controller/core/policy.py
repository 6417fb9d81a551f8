"""The policy (specs/policy.yaml) as an immutable value, and the rule lookup (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from controller.core.notify import NO_NOTIFY, NotifyPolicy, parse_notify


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
    index: int = 0

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
    notify: NotifyPolicy = NO_NOTIFY  # webhook receivers and events (issue 15)

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
    )


def _rule(raw: dict[str, Any], index: int) -> Rule:
    approvers = raw.get("approvers")
    return Rule(
        dags=tuple(raw["dags"]),
        approvers=None if approvers is None else tuple(approvers),
        min_approvers=raw.get("min_approvers", 1),
        min_approvers_for_completed=raw.get("min_approvers_for_completed"),
        max_active_runs_limit=raw.get("max_active_runs_limit"),
        max_runs=raw.get("max_runs"),
        index=index,
    )
