"""Validation of the load guards (pure): time zones, freezes, downstream names and budgets."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic
from controller.core.documents.yamlsafe import Document
from controller.core.model.guards import Window, valid_timezone
from controller.core.model.policy import Policy

_TZ_HINT = "use an IANA time zone name such as Europe/Berlin, America/New_York or UTC (see `tzselect`)"


def _timezones(windows: tuple[Window, ...], doc: Document, where: str) -> Iterator[Diagnostic]:
    for index, window in enumerate(windows):
        if not valid_timezone(window.timezone):
            yield Diagnostic(
                doc.locate((where, index, "timezone")),
                f"unknown time zone {window.timezone!r} in {where}[{index}]",
                _TZ_HINT,
            )


def check_policy_guards(policy: Policy, doc: Document) -> Iterator[Diagnostic]:
    """The policy's windows name real time zones; each freeze ends after it starts."""
    yield from _timezones(policy.windows, doc, "windows")
    for index, freeze in enumerate(policy.freezes):
        if freeze.end <= freeze.start:
            yield Diagnostic(
                doc.locate(("freeze", index, "to")),
                f"freeze {freeze.reason!r} ends ({_z(freeze.end)}) before it starts ({_z(freeze.start)})",
                "swap `from` and `to`, or fix the end date",
            )


def check_spec_guards(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """A spec's windows name real time zones; its downstream systems are budgets it can fit."""
    spec, budgets = item.spec, policy.budgets
    yield from _timezones(spec.windows or (), item.doc, "windows")
    if not budgets:
        return
    where = policy.path or "specs/policy.yaml"
    for index, name in enumerate(spec.downstream):
        budget = budgets.get(name)
        if budget is None:
            yield Diagnostic(
                item.at("downstream", index),
                f"downstream system {name!r} is not declared in the policy's downstream budgets",
                f"declared systems: {', '.join(sorted(budgets))}; use one of them, or add {name!r} under "
                f"`downstream` in {where}",
            )
        elif spec.max_active_runs > budget.max_active_runs:
            yield Diagnostic(
                item.at("max_active_runs"),
                f"max_active_runs {spec.max_active_runs} can never fit the {name} budget of "
                f"{budget.max_active_runs}: the backfill would wait forever",
                f"lower max_active_runs to {budget.max_active_runs} or less, or raise the {name} budget in {where}",
            )


def _z(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
