"""What plan, status and the status page say of the downstream systems' metric analysis (strings out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.core.documents.escaping import md_text, plain
from controller.core.model.policy import Policy
from controller.core.rules.analysis import Verdict
from controller.core.rules.scope import scope_line

NOT_EVALUATED = "analysis evaluated at reconcile"


def analysis_lines(systems: Sequence[str], verdicts: Mapping[str, Verdict] | None) -> list[str]:
    """One line per analysed system: its verdict this pass (an inconclusive one says so), or, for a plan that did
    not query Prometheus (`--no-store`, a pull request's), that reconcile evaluates it."""
    if not systems:
        return []
    if verdicts is None:
        return [f"analysis of {', '.join(systems)}: {NOT_EVALUATED} (this plan does not query Prometheus)"]
    return [f"analysis {s}: {verdicts[s].reason}" for s in systems if s in verdicts]


def spec_analysis(downstream: Sequence[str], verdicts: Mapping[str, Verdict] | None) -> str:
    """The verdicts of the systems a spec lists, for its status line ("" when none was evaluated)."""
    if not verdicts:
        return ""
    return "; ".join(f"analysis {s}: {verdicts[s].reason}" for s in downstream if s in verdicts)


def analysis_text(output: str, systems: Sequence[str], verdicts: Mapping[str, Verdict] | None) -> str:
    """The analysis lines below a plan: text lines, or a markdown list; nothing in JSON (its items say the reasons)."""
    lines = analysis_lines(systems, verdicts)
    if not lines or output == "json":
        return ""
    if output == "markdown":
        return "\n" + "".join(f"- {line}\n" for line in lines)
    return "".join(f"{line}\n" for line in lines)


def scope_text(output: str, policy: Policy) -> str:
    """Issue 44: the scope that applies, below a plan and in the pull-request comment (a policy with a `scope`; nothing
    in JSON)."""
    if policy.scope is None or output == "json":
        return ""
    line = scope_line(policy)
    return f"\n{md_text(line)}\n" if output == "markdown" else f"{plain(line)}\n"
