"""Validate a tree of specs: YAML → schema → model → semantic rules → policy → tree rules (pure).

Nothing fails fast: every file is read and every problem collected, then returned as one sorted list
of located diagnostics.  `now` is a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from controller.core.checks.analysis import check_policy_analysis
from controller.core.checks.approval import check_policy_review, listed_twice
from controller.core.checks.changes import mutable_changes
from controller.core.checks.drain import check_drain
from controller.core.checks.execution import check_execution, check_policy_chunks, check_promote_resume
from controller.core.checks.guard_rules import check_policy_guards, check_spec_guards
from controller.core.checks.loaded import LoadedSpec
from controller.core.checks.names import check_unique_names
from controller.core.checks.notify_rules import check_policy_notify
from controller.core.checks.reserved_conf import check_reserved_conf
from controller.core.checks.result import FileIdentity, ValidationResult
from controller.core.checks.scope_checks import check_policy_scope, check_spec_scope
from controller.core.checks.select import check_select
from controller.core.checks.stages import check_policy_stages, check_spec_stages
from controller.core.documents.diagnostics import Diagnostic, PathPart, Severity
from controller.core.documents.patterns import ecma_search
from controller.core.documents.schema import Schema, SchemaValidator
from controller.core.documents.yamlsafe import Document, load_document
from controller.core.model.logins import login_key, one_of
from controller.core.model.policy import DEFAULT_POLICY, Policy, parse_policy
from controller.core.model.spec import (
    BackfillSpec,
    ReprocessBehavior,
    SourceFile,
    digest,
    format_utc,
    parse_spec,
)

APPLIED_NOTE = "applied before the policy said so: the rule holds for new specs, this one keeps what ran"


class SpecValidator:
    """Checks specs and the policy; the schemas are passed in (ports via the constructor)."""

    def __init__(self, spec_schema: Schema, policy_schema: Schema, *, trusted: bool = False) -> None:
        self._spec_schema = SchemaValidator(spec_schema, trusted=trusted)
        self._policy_schema = SchemaValidator(policy_schema, trusted=trusted)

    def validate(
        self,
        files: Iterable[SourceFile],
        *,
        now: datetime,
        policy_file: SourceFile | None = None,
        read_problems: Sequence[Diagnostic] = (),
        settled: frozenset[str] = frozenset(),
        applied: Mapping[str, BackfillSpec | None] | None = None,
    ) -> ValidationResult:
        """`settled`: digests of spec files whose backfill has finished; such a file, unchanged, was valid
        when it was applied and nothing can be applied from it any more, so only its YAML is read (the
        tree rules, such as unique names, still see it). `applied`: the specs already applied (or merged at the
        base), by name, each as it was then when known: what the policy says of one is a warning, as it can no
        longer change what ran, but of the mutable fields it changed since.

        `files` may be a lazy reader: each file is checked as it comes, and `read_problems` (files that could
        not be read) is looked at only after the last one, so the reader may add to it as it goes."""
        diagnostics: list[Diagnostic] = []
        policy = self._policy(policy_file, diagnostics)
        loaded: list[LoadedSpec] = []
        unloaded: list[FileIdentity] = []
        count, shared = 0, dict[Any, Any]()
        for source in files:  # one file at a time: its bytes and document are dropped once it is checked
            count += 1
            item = self._spec(source, diagnostics, settled, shared, unloaded)
            if item is not None:
                if item.spec.digest not in settled:
                    diagnostics.extend(_checked(item, policy, now, applied or {}))
                loaded.append(item.released())
        diagnostics.extend(check_unique_names(loaded))
        diagnostics[:0] = read_problems
        counted = count + (policy_file is not None) + len(read_problems)
        ordered = sorted(loaded, key=lambda item: (item.spec.name, item.spec.path))
        return ValidationResult(
            specs=tuple(item.spec for item in ordered),
            policy=policy,
            diagnostics=tuple(sorted(set(diagnostics), key=Diagnostic.sort_key)),
            files_checked=counted,
            loaded=tuple(ordered),
            unloaded=tuple(unloaded),
            policy_path=None if policy_file is None else policy_file.path,
            policy_text=None if policy_file is None else policy_file.raw.decode("utf-8", "replace"),
        )

    def load_policy(self, source: SourceFile) -> tuple[Policy, list[Diagnostic]]:
        """A policy file on its own (e.g. as it was at a base commit); the default policy if it is invalid."""
        diagnostics: list[Diagnostic] = []
        return self._policy(source, diagnostics), diagnostics

    def load_one(self, source: SourceFile) -> tuple[LoadedSpec | None, list[Diagnostic]]:
        """Load and schema-check one spec (no policy or tree rules)."""
        diagnostics: list[Diagnostic] = []
        return self._spec(source, diagnostics), diagnostics

    def _policy(self, source: SourceFile | None, diagnostics: list[Diagnostic]) -> Policy:
        if source is None:
            return DEFAULT_POLICY
        doc, valid = self._document(source, self._policy_schema, diagnostics)
        if doc is None or not valid:
            return DEFAULT_POLICY
        policy = parse_policy(doc.data, source.path)
        diagnostics.extend(check_policy_notify(policy, doc))
        diagnostics.extend(check_policy_guards(policy, doc))
        diagnostics.extend(check_policy_analysis(doc))
        diagnostics.extend(check_policy_chunks(policy, doc))
        diagnostics.extend(check_policy_stages(policy, doc))
        diagnostics.extend(check_policy_review(policy, doc))
        diagnostics.extend(check_policy_scope(policy, doc))
        return policy

    def _spec(
        self,
        source: SourceFile,
        diagnostics: list[Diagnostic],
        settled: frozenset[str] = frozenset(),
        shared: dict[Any, Any] | None = None,
        unloaded: list[FileIdentity] | None = None,
    ) -> LoadedSpec | None:
        schema = None if settled and digest(source.raw) in settled else self._spec_schema
        doc, valid = self._document(source, schema, diagnostics)
        if doc is None or not valid:
            if unloaded is not None:
                unloaded.append(_identity(source, doc))
            return None
        return LoadedSpec(parse_spec(doc, source, shared), doc, source.stem, source.reread)

    @staticmethod
    def _document(
        source: SourceFile, schema: SchemaValidator | None, diagnostics: list[Diagnostic]
    ) -> tuple[Document | None, bool]:
        """The document, and whether it loaded and passed the schema."""
        doc, problems = load_document(source.path, source.raw)
        diagnostics.extend(problems)
        if doc is None or schema is None:
            return doc, doc is not None
        problems = schema.validate(doc)
        diagnostics.extend(problems)
        return doc, not problems


def _identity(source: SourceFile, doc: Document | None) -> FileIdentity:
    """Whose a file that did not load seems to be: its `name` and `dag_id` if it says them as strings."""
    data = doc.data if doc is not None and isinstance(doc.data, dict) else {}
    name, dag_id = data.get("name"), data.get("dag_id")
    return FileIdentity(
        source.path, name if isinstance(name, str) and name else source.stem, dag_id if isinstance(dag_id, str) else ""
    )


Check = Callable[[LoadedSpec, Policy, datetime], Iterator[Diagnostic]]


def _checked(
    item: LoadedSpec, policy: Policy, now: datetime, applied: Mapping[str, BackfillSpec | None]
) -> Iterator[Diagnostic]:
    name = item.spec.name
    if name not in applied:
        return check_spec(item, policy, now)
    before = applied[name]
    changed = () if before is None else mutable_changes(before, item.spec)
    return check_spec(item, policy, now, applied=True, changed=changed)


def check_spec(
    item: LoadedSpec, policy: Policy, now: datetime, *, applied: bool = False, changed: Collection[str] = ()
) -> Iterator[Diagnostic]:
    """Every per-spec rule the schema cannot express. For a spec already `applied`, the errors the policy adds
    (those the empty policy does not find) are warnings, but on the fields it `changed` since: a newer policy
    judges what it can still change."""
    yield from check_reserved_conf(item, applied=applied)  # an error, a warning once applied
    found = [d for check in _CHECKS for d in check(item, policy, now)]
    if not applied or policy is DEFAULT_POLICY or not any(d.is_error for d in found):
        yield from found
        return
    own = {d for check in _CHECKS for d in check(item, DEFAULT_POLICY, now) if d.is_error}
    for d in found:
        kept = not d.is_error or d in own or (bool(d.location.path) and d.location.path[0] in changed)
        yield d if kept else as_applied(d)


def as_applied(diagnostic: Diagnostic) -> Diagnostic:
    """A policy's error on a spec already applied, as the warning it is."""
    return replace(diagnostic, message=f"{diagnostic.message} ({APPLIED_NOTE})", severity=Severity.WARNING)


def _name_matches_file(item: LoadedSpec, _policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    stem = item.stem
    if item.spec.name != stem:
        yield Diagnostic(
            item.at("name"),
            f"name {item.spec.name!r} does not match the file name {stem!r}",
            f"rename the file to {item.spec.name}.yaml or set `name: {stem}`",
        )


def _dates_ordered(item: LoadedSpec, _policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    spec = item.spec
    if spec.from_date > spec.to_date:
        yield Diagnostic(
            item.at("to_date"),
            f"to_date {format_utc(spec.to_date)} is before from_date {format_utc(spec.from_date)}",
            "the range is inclusive: to_date must be on or after from_date",
        )


def _not_in_future(item: LoadedSpec, _policy: Policy, now: datetime) -> Iterator[Diagnostic]:
    spec = item.spec
    if spec.from_date >= now:
        yield Diagnostic(
            item.at("from_date"),
            f"the whole range is in the future (from_date {format_utc(spec.from_date)} has not happened yet)",
            "a backfill re-runs the past; Airflow refuses future dates",
        )
    elif spec.to_date > now:
        yield Diagnostic(
            item.at("to_date"),
            f"to_date {format_utc(spec.to_date)} is in the future; Airflow only creates runs whose "
            "interval has already ended",
            None,
            Severity.WARNING,
        )


def _requester_not_approver(item: LoadedSpec, _policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    spec = item.spec
    keys = [login_key(a) for a in spec.approvers]  # GitHub logins: `Alice` is `alice`
    if login_key(spec.requested_by) in keys:
        index = keys.index(login_key(spec.requested_by))
        yield Diagnostic(
            item.at("approvers", index),
            f"{spec.approvers[index]!r} requested the backfill and cannot also approve it",
            "ask someone else to review; separation of duties",
        )
    yield from listed_twice(item)


def _ticket(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    pattern = policy.ticket_pattern
    if pattern is not None and not ecma_search(pattern, item.spec.ticket):
        yield Diagnostic(
            item.at("ticket"),
            f"ticket {item.spec.ticket!r} does not match the policy's pattern {pattern!r}",
            f"use a ticket id that matches {pattern} ({policy.path or 'policy'})",
        )


def _max_active_runs(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    rule = policy.rule_for(item.spec.dag_id)
    limit = rule.max_active_runs_limit if rule and rule.max_active_runs_limit else policy.max_active_runs_limit
    if limit is not None and item.spec.max_active_runs > limit:
        scope = f"rule {rule.index + 1} ({', '.join(rule.dags)})" if rule and rule.max_active_runs_limit else "policy"
        yield Diagnostic(
            item.at("max_active_runs"),
            f"max_active_runs {item.spec.max_active_runs} is over the limit of {limit} set by {scope}",
            f"lower it to {limit} or less",
        )


def _expected_runs(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    spec, rule = item.spec, policy.rule_for(item.spec.dag_id)
    if spec.expected_runs is None and policy.require_expected_runs:
        yield Diagnostic(
            item.at(),
            "missing required field 'expected_runs' (the policy requires it)",
            "add `expected_runs:` with the most DAG runs you expect; `backfillctl plan` shows the count",
        )
    if (
        spec.expected_runs is not None
        and rule is not None
        and rule.max_runs is not None
        and spec.expected_runs > rule.max_runs
    ):
        yield Diagnostic(
            item.at("expected_runs"),
            f"expected_runs {spec.expected_runs} is over max_runs {rule.max_runs} for DAGs {', '.join(rule.dags)}",
            "split the range into smaller specs",
        )


def _approvers_allowed(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    rule = policy.rule_for(item.spec.dag_id)
    if rule is None or rule.approvers is None:
        return
    for index, login in enumerate(item.spec.approvers):
        if not one_of(login, rule.approvers):
            yield Diagnostic(
                item.at("approvers", index),
                f"{login!r} may not approve backfills of {item.spec.dag_id!r}",
                f"allowed approvers: {', '.join(rule.approvers)}",
            )


def _approver_count(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    spec, rule = item.spec, policy.rule_for(item.spec.dag_id)
    if rule is None:
        return
    needed, why = rule.min_approvers, f"DAGs {', '.join(rule.dags)}"
    if spec.reprocess_behavior is ReprocessBehavior.COMPLETED and rule.min_approvers_for_completed:
        needed, why = max(needed, rule.min_approvers_for_completed), "reprocess_behavior 'completed' on " + why
    if len(spec.approvers) < needed:
        yield Diagnostic(
            item.at("approvers"),
            f"{len(spec.approvers)} approver(s) listed; {why} need at least {needed}",
            "add approvers allowed by the policy",
        )


PLACEHOLDER = "placeholder left from `backfillctl new`"
_TODO = re.compile(r"\bTODO\b")
_ZERO_TICKET = re.compile(r"^[A-Za-z]+-0+$")
_FILL_IN = {
    "ticket": "put the change ticket that authorises this backfill",
    "reason": "say in a sentence why this backfill is needed; reviewers read it",
    "requested_by": "put the login of who asks for the backfill",
    "approvers": "list who must approve the pull request (not requested_by)",
}


def _no_placeholders(item: LoadedSpec, _policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    spec = item.spec
    values: list[tuple[tuple[PathPart, ...], str, str]] = [
        (("ticket",), "ticket", spec.ticket),
        (("reason",), "reason", spec.reason),
        (("requested_by",), "requested_by", spec.requested_by),
        *((("approvers", i), "approvers", login) for i, login in enumerate(spec.approvers)),
    ]
    for path, field_name, value in values:
        zero_ticket = field_name == "ticket" and _ZERO_TICKET.match(value)
        if _TODO.search(value) or zero_ticket:
            yield Diagnostic(item.at(*path), f"{PLACEHOLDER}: {field_name} is {value!r}", _FILL_IN[field_name])


def _notify_receivers(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """A spec may only name receivers the policy declares (their webhook URLs live in the environment)."""
    declared = [r.name for r in policy.notify.receivers]
    for index, name in enumerate(item.spec.notify):
        if name not in declared:
            yield Diagnostic(
                item.at("notify", index),
                f"notify receiver {name!r} is not declared in the policy",
                f"declared receivers: {', '.join(declared) or 'none'}; add it under `notify.receivers` in "
                f"{policy.path or 'specs/policy.yaml'} (with `webhook_env`), or remove it",
            )


_CHECKS: tuple[Check, ...] = (
    _no_placeholders,
    check_drain,
    check_select,
    _name_matches_file,
    _dates_ordered,
    _not_in_future,
    _requester_not_approver,
    _ticket,
    _max_active_runs,
    _expected_runs,
    _approvers_allowed,
    _approver_count,
    _notify_receivers,
    check_execution,
    check_promote_resume,
    check_spec_guards,
    check_spec_stages,
    check_spec_scope,
)
