"""Environments, rehearsals, verification and publish: parsing, the rehearsal key, and every refusal of `validate`
with its exact message and place."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from controller.core.checks.stages import check_policy_stages, check_spec_stages
from controller.core.documents.diagnostics import Diagnostic
from controller.core.documents.yamlsafe import load_document
from controller.core.model.policy import Policy, parse_policy
from controller.core.model.spec import Execution
from controller.core.model.stages import Environment, Promotion, Publish, Rehearsal, Slice, Verify
from tests.core.specs import loaded, text

NOW = datetime(2026, 12, 1, tzinfo=UTC)
STAGED = """\
rehearsal:
  slices:
    - {from_date: "2025-01-02", to_date: "2025-01-03"}
    - {from_date: "2025-01-06T00:00:00+01:00", to_date: "2025-01-07"}
  attempt: 2
verify: {dag_id: orders_verify, conf: {table: orders, checks: [rows, sums]}, timeout_minutes: 30, result_task: report}
publish: {dag_id: orders_publish, conf: {}}
writes: [warehouse.orders, warehouse.orders_daily]
rollback: restore from snapshot orders_2025q1; see runbook R-12
execution: {chunk_runs: 3, canary_runs: 2, promotion: on_verification}
"""
POLICY = """\
version: 1
environments:
  staging: {airflow_url_env: BACKFILLCTL_STAGING_AIRFLOW_URL, token_env: BACKFILLCTL_STAGING_AIRFLOW_TOKEN}
  qa: {airflow_url_env: BACKFILLCTL_QA_URL, username_env: BACKFILLCTL_QA_USER, password_env: BACKFILLCTL_QA_PASSWORD}
  production: {rehearse_in: staging}
verification:
  allowed_dags: [orders_verify, orders_publish]
rules:
  - dags: ["finance_*"]
    require_rehearsal: true
    require_rollback_note: true
"""


STAGING_ENV = "{airflow_url_env: BACKFILLCTL_STAGING_URL, token_env: BACKFILLCTL_STAGING_T}"


def policy_of(body: str) -> tuple[Policy, list[Diagnostic]]:
    doc, problems = load_document("specs/policy.yaml", textwrap.dedent(body).encode())
    assert doc is not None, problems
    policy = parse_policy(doc.data, "specs/policy.yaml")
    return policy, list(check_policy_stages(policy, doc))


def spec_problems(body: str, policy_body: str = POLICY, dag: str = "orders_daily") -> list[tuple[str, str, str]]:
    """(where, message, hint) of each diagnostic: `line:column $.path`."""
    item = loaded(text(dag=dag) + body)
    found = sorted(check_spec_stages(item, policy_of(policy_body)[0], NOW), key=Diagnostic.sort_key)
    return [(_where(d), d.message, d.hint or "") for d in found]


def _where(d: Diagnostic) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in d.location.path)
    return f"{d.location.line}:{d.location.column} ${path}"


# --- parsing ------------------------------------------------------------------------------------------------------


def test_a_staged_spec_parses_into_the_values() -> None:
    spec = loaded(text() + STAGED).spec
    jan = [datetime(2025, 1, day, tzinfo=UTC) for day in (2, 3, 5, 7)]
    assert spec.rehearsal == Rehearsal((Slice(jan[0], jan[1]), Slice(jan[2].replace(hour=23), jan[3])), 2)
    assert spec.verify == Verify("orders_verify", {"table": "orders", "checks": ("rows", "sums")}, 30, "report")
    assert spec.publish == Publish("orders_publish", {})
    assert spec.writes == ("warehouse.orders", "warehouse.orders_daily")
    assert spec.rollback == "restore from snapshot orders_2025q1; see runbook R-12"
    assert spec.execution == Execution(3, 2, None, None, Promotion.ON_VERIFICATION)
    assert spec.verify is not None
    assert isinstance(spec.verify.conf, MappingProxyType)  # frozen like dag_run_conf
    with pytest.raises(TypeError):
        spec.verify.conf["table"] = "other"  # type: ignore[index]


def test_the_defaults_of_a_minimal_staged_spec() -> None:
    body = 'rehearsal: {slices: [{from_date: "2025-01-02", to_date: "2025-01-02"}]}\nverify: {dag_id: v}\n'
    body += "publish: {dag_id: p}\nexecution: {chunk_runs: 2}\n"
    spec = loaded(text() + body).spec
    day = datetime(2025, 1, 2, tzinfo=UTC)
    assert spec.rehearsal == Rehearsal((Slice(day, day),), 1)
    assert spec.verify == Verify("v", None, 60, None)
    assert spec.publish == Publish("p", None)
    assert spec.execution == Execution(chunk_runs=2, promotion=Promotion.MANUAL)
    plain = loaded(text()).spec
    assert (plain.rehearsal, plain.verify, plain.publish, plain.writes, plain.rollback) == (None, None, None, (), None)


def test_a_policy_parses_environments_verification_and_the_rules() -> None:
    policy, problems = policy_of(POLICY)
    assert problems == []
    assert policy.environments == (
        Environment("staging", "BACKFILLCTL_STAGING_AIRFLOW_URL", "BACKFILLCTL_STAGING_AIRFLOW_TOKEN"),
        Environment("qa", "BACKFILLCTL_QA_URL", None, "BACKFILLCTL_QA_USER", "BACKFILLCTL_QA_PASSWORD"),
        Environment("production", rehearse_in="staging"),
    )
    assert policy.rehearsal_environment == policy.environments[0]
    assert policy.verification_dags == ("orders_verify", "orders_publish")
    rule = policy.rule_for("finance_daily")
    assert rule is not None
    assert (rule.require_rehearsal, rule.require_rollback_note) == (True, True)
    bare = policy_of("version: 1\nrules: [{dags: [x]}]\n")[0]
    assert (bare.environments, bare.verification_dags, bare.rehearsal_environment) == ((), (), None)
    assert (bare.rules[0].require_rehearsal, bare.rules[0].require_rollback_note) == (False, False)


# --- the rehearsal key --------------------------------------------------------------------------------------------


def test_the_rehearsal_key_keeps_what_a_rehearsal_does_not_prove_and_changes_with_what_it_does() -> None:
    spec = loaded(text() + STAGED).spec
    key = spec.rehearsal_key("bundle-1")
    assert len(key) == 16
    assert replace(spec, notify=("team-orders",)).rehearsal_key("bundle-1") == key
    assert replace(spec, rollback="another note", writes=()).rehearsal_key("bundle-1") == key
    assert spec.rehearsal is not None
    changed = {
        "attempt": replace(spec, rehearsal=replace(spec.rehearsal, attempt=3)).rehearsal_key("bundle-1"),
        "bundle": spec.rehearsal_key("bundle-2"),
        "no bundle": spec.rehearsal_key(None),
        "slice": replace(spec, rehearsal=replace(spec.rehearsal, slices=spec.rehearsal.slices[:1])).rehearsal_key(
            "bundle-1"
        ),
        "reprocess": loaded(text(reprocess="failed") + STAGED).spec.rehearsal_key("bundle-1"),
    }
    assert key not in changed.values()
    assert len(set(changed.values())) == len(changed)


def test_the_rehearsal_key_does_not_depend_on_the_whole_range() -> None:
    spec = loaded(text() + STAGED).spec
    wider = replace(spec, to_date=datetime(2025, 2, 1, tzinfo=UTC))
    assert wider.rehearsal_key("b") == spec.rehearsal_key("b")


# --- the spec's refusals ------------------------------------------------------------------------------------------


def test_a_staged_spec_with_a_policy_that_allows_it_is_valid() -> None:
    assert spec_problems(STAGED) == []


def test_a_slice_that_ends_before_it_starts() -> None:
    body = 'rehearsal:\n  slices:\n    - {from_date: "2025-01-05", to_date: "2025-01-04"}\n'
    assert spec_problems(body) == [
        (
            "14:42 $.rehearsal.slices[0].to_date",
            "rehearsal slice 1 ends (2025-01-04T00:00:00Z) before it starts (2025-01-05T00:00:00Z)",
            "a slice is inclusive like the spec's range: its to_date must be on or after its from_date",
        )
    ]


@pytest.mark.parametrize(
    ("dates", "where"),
    [
        (("2024-12-31", "2025-01-02"), "14:19 $.rehearsal.slices[0].from_date"),
        (("2025-01-06", "2025-01-08"), "14:42 $.rehearsal.slices[0].to_date"),
        (("2025-01-01", "2025-01-08"), "14:42 $.rehearsal.slices[0].to_date"),  # starts on from_date: to_date is out
    ],
)
def test_a_slice_outside_the_range(dates: tuple[str, str], where: str) -> None:
    body = f'rehearsal:\n  slices:\n    - {{from_date: "{dates[0]}", to_date: "{dates[1]}"}}\n'
    assert spec_problems(body) == [
        (
            where,
            f"rehearsal slice 1 ({dates[0]}T00:00:00Z … {dates[1]}T00:00:00Z) is not inside the spec's range "
            "2025-01-01T00:00:00Z … 2025-01-07T00:00:00Z",
            "a rehearsal runs a part of what the spec backfills: move the slice inside from_date … to_date",
        )
    ]


def test_overlapping_slices_name_the_first_one_they_overlap() -> None:
    body = "rehearsal:\n  slices:\n"
    for start, end in (("01", "02"), ("04", "05"), ("02", "04"), ("07", "06"), ("06", "06")):
        body += f'    - {{from_date: "2025-01-{start}", to_date: "2025-01-{end}"}}\n'
    found = spec_problems(body)
    assert [(where, message) for where, message, _ in found] == [
        ("16:7 $.rehearsal.slices[2]", "rehearsal slice 3 overlaps slice 1"),
        ("17:42 $.rehearsal.slices[3].to_date", found[1][1]),  # reversed: said as such, not as an overlap
    ]
    assert found[0][2] == (
        "each slice is its own backfill: a date in two slices runs twice, and the second may find nothing to run "
        "(which fails the rehearsal); merge the slices or move one"
    )


REHEARSE_HINT = (
    "set `production: {rehearse_in: staging}` under `environments` in specs/policy.yaml (staging declared there "
    "with its airflow_url_env and credentials), or remove `rehearsal`"
)


@pytest.mark.parametrize(
    ("policy_body", "why"),
    [
        ("version: 1\n", "the policy declares no environments"),
        (
            f"version: 1\nenvironments: {{staging: {STAGING_ENV}}}\n",
            "the policy's environments declare no production",
        ),
        (
            f"version: 1\nenvironments: {{staging: {STAGING_ENV}, production: {{}}}}\n",
            "the policy's environments.production sets no rehearse_in",
        ),
        (
            "version: 1\nenvironments: {production: {rehearse_in: stagin}}\n",
            "the policy's environments.production.rehearse_in 'stagin' is not a declared environment (declared: "
            "production)",
        ),
        (
            "version: 1\nenvironments: {production: {rehearse_in: production}}\n",
            "the policy's environments.production.rehearse_in names production itself",
        ),
    ],
)
def test_a_rehearsal_needs_production_to_rehearse_in_a_declared_environment(policy_body: str, why: str) -> None:
    body = 'rehearsal: {slices: [{from_date: "2025-01-02", to_date: "2025-01-02"}]}\n'
    assert spec_problems(body, policy_body) == [
        ("12:12 $.rehearsal", f"rehearsal has nowhere to run: {why}", REHEARSE_HINT)
    ]


def test_verify_and_publish_dags_must_be_allowed_by_the_policy() -> None:
    body = "verify: {dag_id: orders_check}\npublish: {dag_id: orders_publish}\n"
    hint = (
        "name an allowed DAG, or add {!r} under `verification.allowed_dags` in specs/policy.yaml (the policy pins "
        "which DAGs specs may trigger)"
    )
    assert spec_problems(body) == [
        (
            "12:18 $.verify.dag_id",
            "verify.dag_id 'orders_check' is not one of the policy's verification.allowed_dags: orders_verify, "
            "orders_publish",
            hint.format("orders_check"),
        )
    ]
    assert spec_problems(body, "version: 1\n") == [
        (
            "12:18 $.verify.dag_id",
            "verify.dag_id 'orders_check' is not in the policy's verification.allowed_dags: the policy allows none",
            hint.format("orders_check"),
        ),
        (
            "13:19 $.publish.dag_id",
            "publish.dag_id 'orders_publish' is not in the policy's verification.allowed_dags: the policy allows none",
            hint.format("orders_publish"),
        ),
    ]


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ("execution: {canary_runs: 2, promotion: on_verification}\n", "verify: the spec sets no verify"),
        (
            "verify: {dag_id: orders_verify}\nexecution: {promotion: on_verification}\n",
            "execution.canary_runs: the spec sets no execution.canary_runs",
        ),
        (
            "execution: {promotion: on_verification}\n",
            "verify and execution.canary_runs: the spec sets no verify and no execution.canary_runs",
        ),
    ],
)
def test_promotion_on_verification_needs_verify_and_a_canary(body: str, missing: str) -> None:
    found = spec_problems(body)
    assert [(where.split(" ")[1], message) for where, message, _ in found] == [
        ("$.execution.promotion", f"execution.promotion on_verification needs {missing}")
    ]
    assert found[0][2] == (
        "the verification run after the canary chunk decides whether the spec continues: add `verify: {dag_id: …}` "
        "and `execution.canary_runs`, or use `promotion: manual`"
    )
    assert spec_problems("execution: {promotion: manual}\n") == []


def test_a_rule_may_require_a_rehearsal_and_a_rollback_note() -> None:
    assert spec_problems("", dag="finance_daily") == [
        (
            "1:1 $",
            "missing required field 'rehearsal' (rule 1 (finance_*) sets require_rehearsal)",
            "add `rehearsal: {slices: [{from_date: …, to_date: …}]}`: short slices of the range that run first in the "
            "environment production rehearses in",
        ),
        (
            "1:1 $",
            "missing required field 'rollback' (rule 1 (finance_*) sets require_rollback_note)",
            "add `rollback:` saying how to undo the backfill (a snapshot to restore, a runbook)",
        ),
    ]
    assert spec_problems(STAGED, dag="finance_daily") == []
    assert spec_problems("", dag="orders_daily") == []  # no rule for it


def test_a_blank_rollback_note_is_refused() -> None:
    assert spec_problems('rollback: "   "\n') == [
        ("12:11 $.rollback", "rollback is blank", "say how to undo the backfill, or remove it")
    ]


# --- the policy's refusals ----------------------------------------------------------------------------------------


def policy_problems(body: str) -> list[tuple[str, str, str, str]]:
    return [(_where(d), d.message, d.hint or "", d.severity.value) for d in policy_of(body)[1]]


def test_another_environment_names_its_url_and_credentials() -> None:
    assert policy_problems(
        "version: 1\nenvironments:\n  staging: {}\n  qa: {airflow_url_env: BACKFILLCTL_QA_URL}\n"
    ) == [
        (
            "3:12 $.environments.staging",
            "environment 'staging' names no airflow_url_env",
            "name the environment variable holding its Airflow's base URL, e.g. `airflow_url_env: "
            "BACKFILLCTL_STAGING_AIRFLOW_URL` (only production defaults to BACKFILLCTL_AIRFLOW_URL)",
            "error",
        ),
        (
            "3:12 $.environments.staging",
            "environment 'staging' names no credentials",
            "set `token_env`, or `username_env` and `password_env`: the names of the environment variables that hold "
            "them (only production defaults to BACKFILLCTL_AIRFLOW_TOKEN, _USERNAME and _PASSWORD)",
            "error",
        ),
        ("4:7 $.environments.qa", "environment 'qa' names no credentials", _CREDENTIALS_HINT, "error"),
    ]
    assert policy_problems("version: 1\nenvironments: {production: {}}\n") == []  # production: the defaults


_CREDENTIALS_HINT = (
    "set `token_env`, or `username_env` and `password_env`: the names of the environment variables that hold them "
    "(only production defaults to BACKFILLCTL_AIRFLOW_TOKEN, _USERNAME and _PASSWORD)"
)


def test_a_login_names_both_halves() -> None:
    body = (
        "version: 1\nenvironments:\n  qa: {airflow_url_env: BACKFILLCTL_QA_URL, username_env: BACKFILLCTL_QA_U}\n"
        "  production: {password_env: BACKFILLCTL_PRODUCTION_P}\n"
    )
    assert policy_problems(body) == [
        (
            "3:59 $.environments.qa.username_env",
            "environment 'qa' names username_env without password_env",
            "a login needs both username_env and password_env (or token_env for a token)",
            "error",
        ),
        (
            "4:30 $.environments.production.password_env",
            "environment 'production' names password_env without username_env",
            "a login needs both username_env and password_env (or token_env for a token)",
            "error",
        ),
    ]


def test_rehearse_in_names_a_declared_environment_other_than_production() -> None:
    assert policy_problems("version: 1\nenvironments: {production: {rehearse_in: stagin}}\n") == [
        (
            "2:42 $.environments.production.rehearse_in",
            "environments.production.rehearse_in 'stagin' is not a declared environment (declared: production)",
            "declare 'stagin' under `environments` with its airflow_url_env and credentials, or fix the name",
            "error",
        )
    ]
    assert policy_problems("version: 1\nenvironments: {production: {rehearse_in: production}}\n") == [
        (
            "2:42 $.environments.production.rehearse_in",
            "production cannot rehearse in itself",
            "name another environment, e.g. staging",
            "error",
        )
    ]


def test_rehearse_in_on_another_environment_has_no_effect() -> None:
    body = "version: 1\nenvironments:\n  qa:\n    {airflow_url_env: BACKFILLCTL_QA_U, "
    body += "token_env: BACKFILLCTL_QA_T, rehearse_in: x}\n"
    assert policy_problems(body) == [
        (
            "4:83 $.environments.qa.rehearse_in",
            "rehearse_in on 'qa' has no effect: only production rehearses",
            "remove it, and set `rehearse_in` on production",
            "warning",
        )
    ]


OWN_STAGING = "name a variable of its own, e.g. BACKFILLCTL_STAGING_AIRFLOW_URL"
STAGING_LOGIN = "username_env: BACKFILLCTL_STAGING_U, password_env: BACKFILLCTL_STAGING_P"


@pytest.mark.parametrize(
    ("staging", "where", "message", "hint"),
    [
        (
            "{airflow_url_env: BACKFILLCTL_AIRFLOW_URL, token_env: BACKFILLCTL_STAGING_T}",
            "3:30 $.environments.staging.airflow_url_env",
            "environment 'staging' reads its Airflow URL from BACKFILLCTL_AIRFLOW_URL, as production does: its "
            "backfills would run in production's Airflow",
            OWN_STAGING,
        ),
        (
            "{airflow_url_env: BACKFILLCTL_STAGING_URL, token_env: BACKFILLCTL_AIRFLOW_TOKEN}",
            "3:66 $.environments.staging.token_env",
            "environment 'staging' reads its token from BACKFILLCTL_AIRFLOW_TOKEN, as production does: production's "
            "token would be sent to staging's Airflow",
            "name a variable of its own, e.g. BACKFILLCTL_STAGING_AIRFLOW_TOKEN",
        ),
        (
            "{airflow_url_env: BACKFILLCTL_STAGING_URL, username_env: BACKFILLCTL_STAGING_U, "
            "password_env: BACKFILLCTL_AUDIT_KEY}",
            "3:106 $.environments.staging.password_env",
            "environment 'staging' reads its password from BACKFILLCTL_AUDIT_KEY, the audit chain's key: it would be "
            "sent to staging's Airflow",
            "name a variable of its own, e.g. BACKFILLCTL_STAGING_AIRFLOW_PASSWORD",
        ),
        (
            f"{{airflow_url_env: BACKFILLCTL_STORE_URL, {STAGING_LOGIN}}}",
            "3:30 $.environments.staging.airflow_url_env",
            "environment 'staging' reads its Airflow URL from BACKFILLCTL_STORE_URL, the store's address and "
            "password: it would be sent to staging's Airflow",
            OWN_STAGING,
        ),
        (
            f"{{airflow_url_env: BACKFILLCTL_AIRFLOW_TIMEOUT, {STAGING_LOGIN}}}",
            "3:30 $.environments.staging.airflow_url_env",
            "environment 'staging' reads its Airflow URL from BACKFILLCTL_AIRFLOW_TIMEOUT: BACKFILLCTL_AIRFLOW_* are "
            "production's",
            OWN_STAGING,
        ),
        (
            f"{{airflow_url_env: QA_URL, {STAGING_LOGIN}}}",
            "3:30 $.environments.staging.airflow_url_env",
            "environment 'staging' reads its Airflow URL from QA_URL, which is not one of its own "
            "(BACKFILLCTL_STAGING_*)",
            "name a variable under BACKFILLCTL_STAGING_, e.g. BACKFILLCTL_STAGING_AIRFLOW_URL: an environment's "
            "variables are its own, so no other secret can be sent to its Airflow",
        ),
        (
            "{airflow_url_env: BACKFILLCTL_STAGING_URL, username_env: BACKFILLCTL_STAGING_LOGIN, "
            "password_env: BACKFILLCTL_STAGING_LOGIN}",
            "3:110 $.environments.staging.password_env",
            "environment 'staging' names BACKFILLCTL_STAGING_LOGIN for both its user name and its password",
            "a variable holds one thing: name one per key",
        ),
    ],
)
def test_another_environment_reads_only_variables_of_its_own(staging: str, where: str, message: str, hint: str) -> None:
    assert policy_problems(f"version: 1\nenvironments:\n  staging: {staging}\n") == [(where, message, hint, "error")]


def test_production_reads_its_own_and_no_other_environment_reads_them_or_anothers() -> None:
    body = (
        "version: 1\nenvironments:\n"
        "  production: {airflow_url_env: BACKFILLCTL_PRODUCTION_URL, token_env: BACKFILLCTL_AIRFLOW_TOKEN}\n"
        "  qa-east: {airflow_url_env: BACKFILLCTL_QA_EAST_URL, token_env: BACKFILLCTL_QA_EAST_TOKEN}\n"
        "  qa: {airflow_url_env: BACKFILLCTL_PRODUCTION_URL, token_env: BACKFILLCTL_QA_EAST_TOKEN}\n"
    )
    assert [(where, message) for where, message, _, _ in policy_problems(body)] == [
        (
            "5:25 $.environments.qa.airflow_url_env",
            "environment 'qa' reads its Airflow URL from BACKFILLCTL_PRODUCTION_URL, as production does: its "
            "backfills would run in production's Airflow",
        ),
        (
            "5:64 $.environments.qa.token_env",
            "environment 'qa' reads its token from BACKFILLCTL_QA_EAST_TOKEN, as qa-east does: qa-east's token would "
            "be sent to qa's Airflow",
        ),
    ]
    later = (  # production declared after the environment that borrows its variable
        "version: 1\nenvironments:\n  qa: {airflow_url_env: BACKFILLCTL_PRODUCTION_URL, token_env: BACKFILLCTL_QA_T}\n"
        "  production: {airflow_url_env: BACKFILLCTL_PRODUCTION_URL}\n"
    )
    assert [message for _, message, _, _ in policy_problems(later)] == [
        "environment 'qa' reads its Airflow URL from BACKFILLCTL_PRODUCTION_URL, as production does: its backfills "
        "would run in production's Airflow"
    ]
    outside = "version: 1\nenvironments:\n  production: {token_env: PROD_TOKEN, password_env: BACKFILLCTL_AUDIT_KEY}\n"
    assert [(where, message, hint) for where, message, hint, _ in policy_problems(outside)][1:] == [
        (
            "3:27 $.environments.production.token_env",
            "environment 'production' reads its token from PROD_TOKEN, which is not one of its own "
            "(BACKFILLCTL_PRODUCTION_* or BACKFILLCTL_AIRFLOW_TOKEN)",
            "name a variable under BACKFILLCTL_PRODUCTION_, e.g. BACKFILLCTL_PRODUCTION_AIRFLOW_TOKEN: an "
            "environment's variables are its own, so no other secret can be sent to its Airflow",
        ),
        (
            "3:53 $.environments.production.password_env",
            "environment 'production' reads its password from BACKFILLCTL_AUDIT_KEY, the audit chain's key: it would "
            "be sent to production's Airflow",
            "name a variable of its own, e.g. BACKFILLCTL_PRODUCTION_AIRFLOW_PASSWORD",
        ),
    ]


def test_a_rule_that_requires_rehearsals_needs_somewhere_to_rehearse() -> None:
    body = "version: 1\nrules:\n  - dags: [finance_*]\n    require_rehearsal: true\n"
    assert policy_problems(body) == [
        (
            "4:24 $.rules[0].require_rehearsal",
            "rule 1 (finance_*) sets require_rehearsal, but production rehearses nowhere: the policy declares no "
            "environments",
            "set `production: {rehearse_in: staging}` under `environments` (staging declared there), or remove "
            "require_rehearsal",
            "error",
        )
    ]
    assert policy_problems(POLICY) == []


@pytest.mark.parametrize(
    "cuts",
    [
        (("05", "06"), ("03", "05")),  # the later slice ends on the day the earlier one starts
        (("02", "02"), ("02", "02")),  # one day, twice
    ],
)
def test_slices_that_share_one_day_overlap(cuts: tuple[tuple[str, str], ...]) -> None:
    body = "rehearsal:\n  slices:\n" + "".join(
        f'    - {{from_date: "2025-01-{start}", to_date: "2025-01-{end}"}}\n' for start, end in cuts
    )
    assert [message for _, message, _ in spec_problems(body)] == ["rehearsal slice 2 overlaps slice 1"]


def test_an_allowed_verify_does_not_excuse_the_publish_dag() -> None:
    body = "verify: {dag_id: orders_verify}\npublish: {dag_id: orders_push}\n"
    assert spec_problems(body) == [
        (
            "13:19 $.publish.dag_id",
            "publish.dag_id 'orders_push' is not one of the policy's verification.allowed_dags: orders_verify, "
            "orders_publish",
            "name an allowed DAG, or add 'orders_push' under `verification.allowed_dags` in specs/policy.yaml (the "
            "policy pins which DAGs specs may trigger)",
        )
    ]


def test_the_hints_name_the_policy_file_it_was_read_from() -> None:
    doc, problems = load_document("conf/policy.yaml", b"version: 1\n")
    assert doc is not None, problems
    policy = parse_policy(doc.data, "conf/policy.yaml")
    body = 'rehearsal: {slices: [{from_date: "2025-01-02", to_date: "2025-01-02"}]}\nverify: {dag_id: orders_check}\n'
    hints = [d.hint for d in sorted(check_spec_stages(loaded(text() + body), policy, NOW), key=Diagnostic.sort_key)]
    assert hints == [
        REHEARSE_HINT.replace("specs/policy.yaml", "conf/policy.yaml"),
        "name an allowed DAG, or add 'orders_check' under `verification.allowed_dags` in conf/policy.yaml (the "
        "policy pins which DAGs specs may trigger)",
    ]


def test_the_messages_list_every_name() -> None:
    staging = f"version: 1\nenvironments:\n  staging: {STAGING_ENV}\n"
    declared = staging + "  production: {rehearse_in: stagin}\n"
    assert [message for _, message, _, _ in policy_problems(declared)] == [
        "environments.production.rehearse_in 'stagin' is not a declared environment (declared: staging, production)"
    ]
    dashed = policy_problems("version: 1\nenvironments:\n  qa-east: {token_env: BACKFILLCTL_QA_EAST_TOKEN}\n")
    assert [hint for _, _, hint, _ in dashed] == [
        "name the environment variable holding its Airflow's base URL, e.g. `airflow_url_env: "
        "BACKFILLCTL_QA_EAST_AIRFLOW_URL` (only production defaults to BACKFILLCTL_AIRFLOW_URL)"
    ]
    rule = staging + "  production: {rehearse_in: staging}\nrules:\n  - dags: [finance_*, billing_*]\n"
    rule += "    require_rehearsal: true\n"
    assert [message for _, message, _ in spec_problems("", rule, dag="billing_x")] == [
        "missing required field 'rehearsal' (rule 1 (finance_*, billing_*) sets require_rehearsal)"
    ]
