"""The policy's `notify` on its own (pure): its default receivers are declared receivers."""

from __future__ import annotations

from collections.abc import Iterator

from controller.core.documents.diagnostics import Diagnostic
from controller.core.documents.yamlsafe import Document
from controller.core.model.policy import Policy


def check_policy_notify(policy: Policy, doc: Document) -> Iterator[Diagnostic]:
    """The policy's default receivers must be declared receivers."""
    declared = [r.name for r in policy.notify.receivers]
    for index, name in enumerate(policy.notify.default_receivers):
        if name not in declared:
            yield Diagnostic(
                doc.locate(("notify", "default_receivers", index)),
                f"default receiver {name!r} is not declared under notify.receivers",
                f"declared receivers: {', '.join(declared) or 'none'}",
            )
