"""Validation of environments, rehearsals, verification and publish (pure): what the schemas cannot say.

A spec's rehearsal slices lie inside its range and need an environment to rehearse in; its verify and publish DAGs
are ones the policy pins; `promotion: on_verification` has a verification and a canary to act on; a rule may
require a rehearsal or a rollback note. The policy's environments each reach an Airflow of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.documents.yamlsafe import Document
from controller.core.model.policy import Policy, Rule
from controller.core.model.spec import NO_EXECUTION, format_utc
from controller.core.model.stages import PRODUCTION, PRODUCTION_DEFAULTS, Environment, Promotion
from controller.core.rules.environments import prefix, variable_problems

_POLICY = "specs/policy.yaml"


def check_spec_stages(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """Every rule of this module for one spec."""
    yield from _slices(item)
    yield from _rehearsal_environment(item, policy)
    yield from _verification_dags(item, policy)
    yield from _promotion(item)
    yield from _required_by_rule(item, policy)


def _slices(item: LoadedSpec) -> Iterator[Diagnostic]:
    """Each slice is ordered and inside the range; no date is in two slices."""
    spec = item.spec
    if spec.rehearsal is None:
        return  # most specs: nothing to format
    span = f"{format_utc(spec.from_date)} … {format_utc(spec.to_date)}"
    for index, piece in enumerate(spec.rehearsal.slices):
        at = ("rehearsal", "slices", index)
        shown = f"rehearsal slice {index + 1} ({format_utc(piece.from_date)} … {format_utc(piece.to_date)})"
        if piece.from_date > piece.to_date:
            yield Diagnostic(
                item.at(*at, "to_date"),
                f"rehearsal slice {index + 1} ends ({format_utc(piece.to_date)}) before it starts "
                f"({format_utc(piece.from_date)})",
                "a slice is inclusive like the spec's range: its to_date must be on or after its from_date",
            )
        elif piece.from_date < spec.from_date or piece.to_date > spec.to_date:
            outside = "from_date" if piece.from_date < spec.from_date else "to_date"
            yield Diagnostic(
                item.at(*at, outside),
                f"{shown} is not inside the spec's range {span}",
                "a rehearsal runs a part of what the spec backfills: move the slice inside from_date … to_date",
            )
    yield from _overlaps(item)


def _overlaps(item: LoadedSpec) -> Iterator[Diagnostic]:
    slices = item.spec.rehearsal.slices if item.spec.rehearsal else ()
    ordered = [(i, s) for i, s in enumerate(slices) if s.from_date <= s.to_date]  # a reversed one is reported as such
    for index, piece in ordered:
        earlier = next(
            (i for i, o in ordered if i < index and piece.from_date <= o.to_date and o.from_date <= piece.to_date), None
        )
        if earlier is not None:
            yield Diagnostic(
                item.at("rehearsal", "slices", index),
                f"rehearsal slice {index + 1} overlaps slice {earlier + 1}",
                "each slice is its own backfill: a date in two slices runs twice, and the second may find nothing "
                "to run (which fails the rehearsal); merge the slices or move one",
            )


def _rehearsal_environment(item: LoadedSpec, policy: Policy) -> Iterator[Diagnostic]:
    """A rehearsal runs where production's `rehearse_in` says; without one it could never run."""
    if item.spec.rehearsal is None:
        return
    why = _no_rehearsal_environment(policy)
    if why is not None:
        yield Diagnostic(
            item.at("rehearsal"),
            f"rehearsal has nowhere to run: {why}",
            f"set `production: {{rehearse_in: staging}}` under `environments` in {policy.path or _POLICY} (staging "
            "declared there with its airflow_url_env and credentials), or remove `rehearsal`",
        )


def _no_rehearsal_environment(policy: Policy) -> str | None:
    """Why production rehearses nowhere (None: it rehearses in a declared environment)."""
    production = policy.environment(PRODUCTION)
    if not policy.environments:
        return "the policy declares no environments"
    if production is None:
        return "the policy's environments declare no production"
    if production.rehearse_in is None:
        return "the policy's environments.production sets no rehearse_in"
    if production.rehearse_in == PRODUCTION:
        return "the policy's environments.production.rehearse_in names production itself"
    if policy.rehearsal_environment is None:
        return (
            f"the policy's environments.production.rehearse_in {production.rehearse_in!r} is not a declared "
            f"environment ({_declared(policy)})"
        )
    return None


def _verification_dags(item: LoadedSpec, policy: Policy) -> Iterator[Diagnostic]:
    """A spec triggers only the DAGs the policy pins for verification and publishing."""
    allowed = policy.verification_dags
    for field, stage in (("verify", item.spec.verify), ("publish", item.spec.publish)):
        if stage is None or stage.dag_id in allowed:
            continue
        listed = (
            f"one of the policy's verification.allowed_dags: {', '.join(allowed)}"
            if allowed
            else ("in the policy's verification.allowed_dags: the policy allows none")
        )
        yield Diagnostic(
            item.at(field, "dag_id"),
            f"{field}.dag_id {stage.dag_id!r} is not {listed}",
            f"name an allowed DAG, or add {stage.dag_id!r} under `verification.allowed_dags` in "
            f"{policy.path or _POLICY} (the policy pins which DAGs specs may trigger)",
        )


def _promotion(item: LoadedSpec) -> Iterator[Diagnostic]:
    """`on_verification` continues on the verification after the canary: both must exist."""
    spec = item.spec
    ex = spec.execution or NO_EXECUTION
    if ex.promotion is not Promotion.ON_VERIFICATION:
        return
    missing = [
        name
        for name, unset in (("verify", spec.verify is None), ("execution.canary_runs", ex.canary_runs is None))
        if unset
    ]
    if missing:
        yield Diagnostic(
            item.at("execution", "promotion"),
            f"execution.promotion on_verification needs {' and '.join(missing)}: the spec sets no "
            f"{' and no '.join(missing)}",
            "the verification run after the canary chunk decides whether the spec continues: add "
            "`verify: {dag_id: …}` and `execution.canary_runs`, or use `promotion: manual`",
        )


def _required_by_rule(item: LoadedSpec, policy: Policy) -> Iterator[Diagnostic]:
    spec, rule = item.spec, policy.rule_for(item.spec.dag_id)
    if rule is not None and rule.require_rehearsal and spec.rehearsal is None:
        yield Diagnostic(
            item.at(),
            f"missing required field 'rehearsal' ({_scope(rule)} sets require_rehearsal)",
            "add `rehearsal: {slices: [{from_date: …, to_date: …}]}`: short slices of the range that run first in "
            "the environment production rehearses in",
        )
    if rule is not None and rule.require_rollback_note and spec.rollback is None:
        yield Diagnostic(
            item.at(),
            f"missing required field 'rollback' ({_scope(rule)} sets require_rollback_note)",
            "add `rollback:` saying how to undo the backfill (a snapshot to restore, a runbook)",
        )
    if spec.rollback is not None and not spec.rollback.strip():
        yield Diagnostic(item.at("rollback"), "rollback is blank", "say how to undo the backfill, or remove it")


def check_policy_stages(policy: Policy, doc: Document) -> Iterator[Diagnostic]:
    """Each environment reaches an Airflow of its own with variables of its own; production rehearses in a declared
    one; a rule that requires rehearsals has somewhere to rehearse."""
    production = (policy.environment(PRODUCTION) or Environment(PRODUCTION)).names
    for index, env in enumerate(policy.environments):
        yield from _environment(env, doc)
        yield from _rehearse_in(env, policy, doc)
        for problem in variable_problems(env, production, policy.environments[:index]):  # the first one keeps it
            yield Diagnostic(doc.locate(("environments", env.name, problem.key)), problem.message, problem.hint)
    yield from _rules_can_rehearse(policy, doc)


def _environment(env: Environment, doc: Document) -> Iterator[Diagnostic]:
    """Another environment names its URL and credentials; a login names both halves."""
    at = ("environments", env.name)
    other = env.name != PRODUCTION
    if other and env.airflow_url_env is None:
        yield Diagnostic(
            doc.locate(at),
            f"environment {env.name!r} names no airflow_url_env",
            "name the environment variable holding its Airflow's base URL, e.g. `airflow_url_env: "
            f"{prefix(env.name)}AIRFLOW_URL` (only production defaults to "
            f"{PRODUCTION_DEFAULTS[0]})",
        )
    half = _half_login(env)
    if half is not None:
        present, absent = half
        yield Diagnostic(
            doc.locate((*at, present)),
            f"environment {env.name!r} names {present} without {absent}",
            "a login needs both username_env and password_env (or token_env for a token)",
        )
    elif other and env.token_env is None and env.username_env is None:
        yield Diagnostic(
            doc.locate(at),
            f"environment {env.name!r} names no credentials",
            "set `token_env`, or `username_env` and `password_env`: the names of the environment variables that hold "
            "them (only production defaults to BACKFILLCTL_AIRFLOW_TOKEN, _USERNAME and _PASSWORD)",
        )


def _half_login(env: Environment) -> tuple[str, str] | None:
    if env.username_env is not None and env.password_env is None:
        return "username_env", "password_env"
    if env.password_env is not None and env.username_env is None:
        return "password_env", "username_env"
    return None


def _rehearse_in(env: Environment, policy: Policy, doc: Document) -> Iterator[Diagnostic]:
    target = env.rehearse_in
    if target is None:
        return
    at = doc.locate(("environments", env.name, "rehearse_in"))
    if env.name != PRODUCTION:
        yield Diagnostic(
            at,
            f"rehearse_in on {env.name!r} has no effect: only production rehearses",
            "remove it, and set `rehearse_in` on production",
            Severity.WARNING,
        )
    elif target == PRODUCTION:
        yield Diagnostic(at, "production cannot rehearse in itself", "name another environment, e.g. staging")
    elif policy.environment(target) is None:
        yield Diagnostic(
            at,
            f"environments.production.rehearse_in {target!r} is not a declared environment ({_declared(policy)})",
            f"declare {target!r} under `environments` with its airflow_url_env and credentials, or fix the name",
        )


def _rules_can_rehearse(policy: Policy, doc: Document) -> Iterator[Diagnostic]:
    """A rule requiring rehearsals refuses every spec on its DAGs unless production rehearses somewhere."""
    why = _no_rehearsal_environment(policy)
    if why is None:
        return
    for rule in policy.rules:
        if rule.require_rehearsal:
            yield Diagnostic(
                doc.locate(("rules", rule.index, "require_rehearsal")),
                f"{_scope(rule)} sets require_rehearsal, but production rehearses nowhere: {why}",
                "set `production: {rehearse_in: staging}` under `environments` (staging declared there), or remove "
                "require_rehearsal",
            )


def _declared(policy: Policy) -> str:
    names = [env.name for env in policy.environments]
    return f"declared: {', '.join(names)}" if names else "none declared"


def _scope(rule: Rule) -> str:
    return f"rule {rule.index + 1} ({', '.join(rule.dags)})"
