"""Issue 44: the scope where Airflow tells the DAG's tags (validate with Airflow, the reconcile plan), at the approval
gate (the base policy's scope), and what the store records of each login's scope."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from packaging.version import Version

from controller.adapters.store import Store
from controller.commands.reconcile.observe import identity_of
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.runtime.scopes import claim_scope
from controller.commands.verbs.validate import check_dags
from controller.core.model.airflow import DagInfo
from controller.core.model.capabilities import capabilities_of
from controller.core.model.policy import Policy
from controller.core.model.scope import Scope
from controller.core.plan.identity import Identity
from controller.core.plan.provenance import Verdict
from controller.core.plan.queue import make_plan
from controller.errors import ScopeConflict
from tests.commands.reconcile.harness import Bench
from tests.core.plan.test_plan import OK, dates, spec, world
from tests.core.plan.test_provenance import ALL, WAREHOUSE, carried, decided, evidence, gate

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
TAGGED = "version: 1\nrequire_reviewed_merge: false\nscope: {dags: [fin_*], tags: [finance]}\n"


def test_validate_with_airflow_reads_the_tags_and_refuses_a_dag_without_one(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    bench.policy(TAGGED)
    bench.spec("ours", dag="ledger")
    bench.spec("theirs", dag="ads")
    bench.spec("unread", dag="misc")
    tags: dict[str, tuple[str, ...] | None] = {"ledger": ("finance", "nightly"), "ads": ("ads",), "misc": None}

    def lookup(dag_id: str) -> DagInfo:
        return DagInfo(dag_id, False, False, False, True, None, tags=tags[dag_id])

    offline = validate_paths([], bench.specs, NOW)
    assert sorted((d.location.source, d.severity.value) for d in offline.diagnostics) == [
        (str(bench.specs / "ours.yaml"), "warning"),
        (str(bench.specs / "theirs.yaml"), "warning"),
        (str(bench.specs / "unread.yaml"), "warning"),
    ]
    checked = check_dags(offline, lookup, NOW)
    assert [(d.location.source, d.location.path, d.message, d.hint, d.severity.value) for d in checked.diagnostics] == [
        (
            str(bench.specs / "theirs.yaml"),
            ("dag_id",),
            f"DAG ads is outside this repository's scope (dags [fin_*], tags [finance]; {bench.specs}/policy.yaml) "
            "(its tags: ads)",
            "a spec may touch only the DAGs of its repository's scope (policy `scope`): another team's DAG is "
            "backfilled from that team's specs repository, or widen `scope` in a reviewed policy change",
            "error",
        ),
        (
            str(bench.specs / "unread.yaml"),
            ("dag_id",),
            f"DAG misc matches none of the scope's dags ({bench.specs}/policy.yaml); whether it carries one of its "
            "tags [finance] needs Airflow: the tag check was skipped (tag check skipped)",
            "validate with Airflow configured (BACKFILLCTL_AIRFLOW_URL) checks the tags; plan and reconcile do",
            "warning",
        ),
    ]  # the skipped-tag warnings of the DAGs whose tags were read are gone; the one whose tags were not is kept
    unread = check_dags(offline, lambda d: DagInfo(d, False, False, False, True, None), NOW)
    assert len([d for d in unread.diagnostics if "tag check skipped" in d.message]) == 3  # no tags read: all kept
    bench.close()


def test_reconcile_blocks_a_create_on_a_dag_whose_tags_are_outside_the_scope() -> None:
    policy = Policy(scope=Scope(("fin_*",), ("finance",)), path="specs/policy.yaml")
    blocked = make_plan([spec()], policy, world(info=replace(OK, tags=("ads",)), dry={"s": dates(7)}))
    assert [(i.kind.value, i.phase.value, i.error) for i in blocked.items] == [("blocked", "Blocked", True)]
    assert blocked.items[0].reason.startswith(
        "DAG d is outside this repository's scope (dags [fin_*], tags [finance]; specs/policy.yaml) (its tags: ads); "
        "a spec may touch only the DAGs of its repository's scope"
    )
    allowed = make_plan([spec()], policy, world(info=replace(OK, tags=("finance",)), dry={"s": dates(7)}))
    assert [i.kind.value for i in allowed.items] == ["create"]
    by_id = make_plan(
        [spec(dag="fin_x")], policy, world(info=replace(OK, dag_id="fin_x"), dag="fin_x", dry={"s": dates(7)})
    )
    assert [i.kind.value for i in by_id.items] == ["create"]


def test_the_gate_judges_a_spec_by_the_scope_of_its_changes_base_policy() -> None:
    """A scope widened in the change that adds a spec does not admit it: the base's scope judges, like any loosening."""
    base = replace(WAREHOUSE, scope=Scope(("finance_*",)), path="specs/policy.yaml@base")
    assert decided(gate(carried(evidence(*ALL), policy=base))) == (
        Verdict.REFUSED,
        "approval gate at reconcile: #41 is judged by the policy at its base: DAG orders_daily is outside the base "
        "policy's scope (dags [finance_*]; specs/policy.yaml@base); widen the scope in a change of its own first",
    )
    assert decided(gate(carried(evidence(*ALL), policy=replace(base, scope=Scope(("orders_*",)))))) == (
        Verdict.APPROVED,
        "",
    )
    tagged = replace(base, scope=Scope(("finance_*",), ("orders",)))  # only Airflow knows: reconcile decides
    assert decided(gate(carried(evidence(*ALL), policy=tagged))) == (Verdict.APPROVED, "")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    made = Store(f"sqlite:///{tmp_path}/state.db")
    yield made
    made.close()


def test_the_store_records_each_logins_scope_and_refuses_an_overlapping_one(store: Store) -> None:
    fin = Policy(scope=Scope(("fin_*",)), path="specs/policy.yaml")
    claim_scope(store, Identity("team-a"), fin, record=False)
    assert store.recorded_scopes() == {}  # a dry run records nothing
    claim_scope(store, Identity("team-a"), fin, record=True)
    assert store.recorded_scopes() == {"team-a": '{"dags": ["fin_*"], "tags": []}'}
    claim_scope(store, Identity("team-a"), replace(fin, scope=Scope(("fin_*", "ledger"))), record=True)
    assert store.recorded_scopes() == {"team-a": '{"dags": ["fin_*", "ledger"], "tags": []}'}  # its own, changed
    claim_scope(store, Identity("team-b"), Policy(scope=Scope(("ads_*",))), record=True)
    with pytest.raises(ScopeConflict) as refused:
        claim_scope(store, Identity("team-c"), Policy(path="specs/policy.yaml"), record=True)
    assert refused.value.exit_code == 2
    assert refused.value.message == (
        "this store already reconciles for Airflow login 'team-a', whose scope overlaps this reconciler's (login "
        "'team-c', scope dags [*] in specs/policy.yaml): both may touch dags * and fin_*"
    )
    assert refused.value.hint == (
        "one store and one Airflow login per team: point BACKFILLCTL_STORE_URL at this team's own store, or make "
        'the two policies\' `scope` disjoint (README, "Several teams, one Airflow"; docs/least-privilege.md)'
    )
    assert sorted(store.recorded_scopes()) == ["team-a", "team-b"]
    claim_scope(store, Identity(None), Policy(), record=True)  # no login to tell: nothing decided, nothing recorded
    assert sorted(store.recorded_scopes()) == ["team-a", "team-b"]


class FakeClient:
    def __init__(self, claims: dict[str, object] | None, version: str | None) -> None:
        self.claims, self.version = claims, version

    def token_claims(self) -> dict[str, object] | None:
        return self.claims

    @property
    def known_capabilities(self) -> object:
        return None if self.version is None else capabilities_of(Version(self.version), self.version)


@pytest.mark.parametrize(
    ("claims", "version", "identity"),
    [
        ({"sub": "team-a"}, "3.3.2", Identity("team-a", by_runs=True)),
        ({"sub": "team-a"}, "3.1.0", Identity("team-a", by_runs=True)),
        ({"sub": "team-a"}, "3.4.0b2", Identity("team-a", by_runs=False)),
        ({"sub": "team-a"}, "3.4.0", Identity("team-a", by_runs=False)),
        ({"sub": "team-a"}, None, Identity("team-a", by_runs=True)),
        ({"sub": ""}, "3.3.2", Identity(None)),
        ({"sub": 7}, "3.3.2", Identity(None)),
        ({}, "3.3.2", Identity(None)),
        (None, "3.3.2", Identity(None)),
    ],
)
def test_the_login_is_the_tokens_sub_and_3_4_compares_no_display_name(
    claims: dict[str, object] | None, version: str | None, identity: Identity
) -> None:
    assert identity_of(FakeClient(claims, version)) == identity  # type: ignore[arg-type]
