"""`drain_dag` (Airflow 3.4, PR #72407): only on a DAG the policy's `drain.allowed_dags` lists, never on a chunked
spec, refused before any backfill call on a release without it, sent on create where it has it, and Airflow's 403
for a login that may not edit the DAG said as that permission."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from packaging.version import Version

from controller.adapters.airflow import AirflowClient
from controller.cli import main
from controller.core.checks.dags import check_against_release
from controller.core.checks.drain import check_drain
from controller.core.checks.validation import check_spec
from controller.core.model.airflow import BackfillRequest
from controller.core.model.capabilities import capabilities_of
from controller.core.model.policy import DEFAULT_POLICY, parse_policy
from controller.core.model.secret import Secret
from controller.errors import AirflowAuthError, AirflowVersionError
from tests.cli.test_cli_validate import SPEC
from tests.core.specs import loaded, text

NOW = datetime(2026, 12, 1, tzinfo=UTC)
ALLOWED = parse_policy({"version": 1, "drain": {"allowed_dags": ["orders_*"]}}, "specs/policy.yaml")
DAY = datetime(2025, 1, 1, tzinfo=UTC)
NOT_ALLOWED = (
    "drain_dag: DAG billing_daily is not one the policy lets a spec drain (drain.allowed_dags: orders_*); a drain "
    "pauses the DAG after the backfill"
)
CHUNKED = (
    "drain_dag cannot be used on a chunked spec: each chunk's drain would pause the DAG when it ends, and the "
    "paused DAG would block the next chunk"
)


def drain_errors(body: str, policy: object = ALLOWED) -> list[tuple[str, tuple[object, ...]]]:
    found = check_spec(loaded(body), policy, NOW)  # type: ignore[arg-type]
    return [(d.message, d.location.path) for d in found if "drain" in d.message and d.is_error]


def test_a_drain_on_an_allowed_dag_as_one_backfill_is_valid() -> None:
    assert drain_errors(text(dag="orders_daily") + "drain_dag: true\n") == []
    assert drain_errors(text(dag="billing_daily") + "drain_dag: false\n") == []


def test_a_drain_on_a_dag_the_policy_does_not_list_is_refused_at_the_field() -> None:
    assert drain_errors(text(dag="billing_daily") + "drain_dag: true\n") == [(NOT_ALLOWED, ("drain_dag",))]
    assert drain_errors(text(dag="orders_daily") + "drain_dag: true\n", DEFAULT_POLICY) == [
        (
            "drain_dag: DAG orders_daily is not one the policy lets a spec drain (drain.allowed_dags: none); a drain "
            "pauses the DAG after the backfill",
            ("drain_dag",),
        )
    ]


def test_a_chunked_drain_is_refused_also_when_the_policy_chunks_it() -> None:
    chunked = text(dag="orders_daily") + "drain_dag: true\nexecution: {chunk_runs: 2}\n"
    assert drain_errors(chunked) == [(CHUNKED, ("execution", "chunk_runs"))]
    by_rule = parse_policy(
        {
            "version": 1,
            "drain": {"allowed_dags": ["orders_*"]},
            "rules": [{"dags": ["orders_*"], "chunk_runs": {"default": 3}}],
        },
        "specs/policy.yaml",
    )
    assert drain_errors(text(dag="orders_daily") + "drain_dag: true\n", by_rule) == [
        (
            "drain_dag cannot be used on a chunked spec (rule 1 of the policy chunks it by default): each chunk's "
            "drain would pause the DAG when it ends, and the paused DAG would block the next chunk",
            ("drain_dag",),
        )
    ]


def test_the_schema_takes_a_boolean_and_the_policy_its_globs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "policy.yaml").write_text("version: 1\ndrain:\n  allowed_dags: [orders_daily]\n")
    (tmp_path / "specs" / "good.yaml").write_text(
        SPEC.format(name="good", to="2025-01-07", reprocess="none") + "drain_dag: true\n"
    )
    assert main(["validate", "specs/good.yaml"]) == 0, capsys.readouterr().out
    (tmp_path / "specs" / "good.yaml").write_text(
        SPEC.format(name="good", to="2025-01-07", reprocess="none") + "drain_dag: yes please\n"
    )
    assert main(["validate", "specs/good.yaml"]) == 1
    assert "$.drain_dag: 'yes please' is not of type 'boolean'" in capsys.readouterr().out


def test_identity_holds_drain_only_when_set() -> None:
    plain = loaded(text()).spec
    drained = loaded(text() + "drain_dag: true\n").spec
    assert "drain_dag" not in plain.identity()  # identities stored before drain_dag still match
    assert drained.identity()["drain_dag"] is True
    assert plain.with_identity(drained.identity()).drain_dag is True


def recorder(answer: httpx.Response, sent: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer

    return httpx.MockTransport(handle)


BACKFILL = {
    "id": 9, "dag_id": "orders_daily", "from_date": "2025-01-01T00:00:00Z", "to_date": "2025-01-02T00:00:00Z",
    "dag_run_conf": None, "is_paused": False, "reprocess_behavior": "none", "max_active_runs": 2,
    "created_at": "2026-12-01T00:00:00Z", "completed_at": None, "updated_at": "2026-12-01T00:00:00Z",
}  # fmt: skip


def client(version: str, transport: httpx.MockTransport) -> AirflowClient:
    caps = capabilities_of(Version(version), version)
    return AirflowClient("http://af", token=Secret("t"), transport=transport, capabilities=caps)


def test_a_drain_is_sent_on_create_where_the_release_has_it() -> None:
    sent: list[httpx.Request] = []
    with client("3.4.0b2", recorder(httpx.Response(200, json=BACKFILL), sent)) as c:
        c.create(BackfillRequest("orders_daily", DAY, DAY, drain_dag=True))
        c.create(BackfillRequest("orders_daily", DAY, DAY))
    assert [json.loads(r.content).get("drain_dag", "absent") for r in sent] == [True, "absent"]


@pytest.mark.parametrize("version", ["3.1.8", "3.2.2", "3.3.2"])
def test_a_drain_is_refused_before_any_call_on_a_release_without_it(version: str) -> None:
    sent: list[httpx.Request] = []
    with client(version, recorder(httpx.Response(200, json=BACKFILL), sent)) as c:
        for call in (c.create, c.planned_runs):
            with pytest.raises(AirflowVersionError) as refused:
                call(BackfillRequest("orders_daily", DAY, DAY, drain_dag=True))
            assert refused.value.message == (
                f"drain_dag: true needs Airflow 3.4 or newer; Airflow {version} cannot keep the DAG's scheduled runs "
                "from being created while the backfill runs (remove the field, or upgrade Airflow)"
            )
    assert sent == []


def test_a_403_on_a_drain_names_the_dag_edit_permission() -> None:
    sent: list[httpx.Request] = []
    forbidden = httpx.Response(403, json={"detail": "Draining requires permission to edit Dag: orders_daily"})
    with client("3.4.0b2", recorder(forbidden, sent)) as c, pytest.raises(AirflowAuthError) as refused:
        c.create(BackfillRequest("orders_daily", DAY, DAY, drain_dag=True))
    assert refused.value.message == (
        "Airflow refused to drain DAG orders_daily: the login may create backfills but not edit that DAG, and "
        "draining pauses it (Airflow needs the DAG edit permission, PUT on the DAG)"
    )
    assert refused.value.hint == (
        "grant the backfill login edit on DAG orders_daily (docs/least-privilege.md: only on the DAGs the policy's "
        "drain.allowed_dags lists), or remove drain_dag from the spec"
    )
    assert len(sent) == 1  # a refusal is not retried


@pytest.mark.parametrize(("version", "refused"), [("3.3.2", True), ("3.4.0b2", False)])
def test_validate_with_airflow_refuses_a_drain_its_release_lacks(version: str, refused: bool) -> None:
    item = loaded(text(dag="orders_daily") + "drain_dag: true\n")
    found = [(d.message, d.location.path) for d in check_against_release(item, capabilities_of(Version(version)))]
    assert found == (
        [
            (
                "drain_dag: true needs Airflow 3.4 or newer; Airflow 3.3.2 cannot keep the DAG's scheduled runs from "
                "being created while the backfill runs (remove the field, or upgrade Airflow)",
                ("drain_dag",),
            )
        ]
        if refused
        else []
    )


def diagnostics(body: str, policy: object) -> list[tuple[str, str, tuple[object, ...], str]]:
    """Every diagnostic `check_drain` makes: message, hint, the field it points at and its severity."""
    found = check_drain(loaded(body), policy, NOW)  # type: ignore[arg-type]
    return [(d.message, d.hint or "", d.location.path, d.severity.value) for d in found]


UNLISTED_BILLING = (
    "drain_dag: no downstream system of the policy lists DAG billing_daily in its dags with owners: nobody but the "
    "spec's approvers approves holding back its scheduled runs"
)


def test_each_drain_refusal_says_how_to_fix_it_where_the_policy_is() -> None:
    two = parse_policy({"version": 1, "drain": {"allowed_dags": ["orders_*", "sales_*"]}}, "specs/policy.yaml")
    assert diagnostics(text(dag="billing_daily") + "drain_dag: true\n", two) == [
        (
            "drain_dag: DAG billing_daily is not one the policy lets a spec drain (drain.allowed_dags: orders_*, "
            "sales_*); a drain pauses the DAG after the backfill",
            "remove drain_dag, or add billing_daily to drain.allowed_dags in specs/policy.yaml (a reviewed change)",
            ("drain_dag",),
            "error",
        ),
        (
            UNLISTED_BILLING,
            "list billing_daily in the `dags` of the systems it loads (with their owners) in specs/policy.yaml, so "
            "their owners approve the drain",
            ("drain_dag",),
            "warning",
        ),
    ]
    (refused, unlisted) = diagnostics(text(dag="billing_daily") + "drain_dag: true\n", DEFAULT_POLICY)
    assert (
        refused[1] == "remove drain_dag, or add billing_daily to drain.allowed_dags in the policy (a reviewed change)"
    )
    assert unlisted[1].endswith("in the policy, so their owners approve the drain")
    chunked = text(dag="orders_daily") + "drain_dag: true\nexecution: {chunk_runs: 2}\n"
    assert diagnostics(chunked, ALLOWED)[0] == (
        CHUNKED,
        "remove drain_dag, or run the range as one backfill (no execution.chunk_runs)",
        ("execution", "chunk_runs"),
        "error",
    )
    unchunked_rule = parse_policy(
        {"version": 1, "drain": {"allowed_dags": ["orders_*"]}, "rules": [{"dags": ["orders_*"], "min_approvers": 1}]},
        "specs/policy.yaml",
    )
    assert [d[0] for d in diagnostics(text(dag="orders_daily") + "drain_dag: true\n", unchunked_rule)] == [
        UNLISTED_BILLING.replace("billing_daily", "orders_daily")
    ]
    assert diagnostics(text(dag="orders_daily") + "drain_dag: false\n", ALLOWED) == []
