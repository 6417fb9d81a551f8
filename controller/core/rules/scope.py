"""Whether a spec's DAG is inside the policy's `scope` (pure): refused at `validate` and at reconcile when it is not.

Only Airflow knows a DAG's tags: a DAG that none of the scope's `dags` globs match, under a scope with `tags`, is
"not known" offline (validate says the tag check was skipped) and decided where its details are read (validate
with Airflow, plan, reconcile)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from controller.core.model.policy import Policy
from controller.core.model.scope import Scope, scope_from_json

HINT = (
    "a spec may touch only the DAGs of its repository's scope (policy `scope`): another team's DAG is backfilled "
    "from that team's specs repository, or widen `scope` in a reviewed policy change"
)


def where(policy: Policy) -> str:
    """The policy file a scope comes from, as messages name it."""
    return policy.path or "the policy"


def outside(dag_id: str, tags: Collection[str] | None, policy: Policy) -> str | None:
    """Why a spec on `dag_id` is refused (None: in scope, no scope, or only the DAG's unknown tags could tell)."""
    scope = policy.scope
    if scope is None or scope.covers(dag_id, tags) is not False:
        return None
    carried = "" if tags is None or not scope.tags else f" (its tags: {', '.join(sorted(tags)) or 'none'})"
    return f"DAG {dag_id} is outside this repository's scope ({scope.text()}; {where(policy)}){carried}"


def tags_unchecked(dag_id: str, policy: Policy) -> str | None:
    """Offline: the DAG is in scope only if it carries one of the scope's tags, which needs Airflow (None: decided)."""
    scope = policy.scope
    if scope is None or scope.covers(dag_id, None) is not None:
        return None
    return (
        f"DAG {dag_id} matches none of the scope's dags ({where(policy)}); whether it carries one of its tags "
        f"[{', '.join(scope.tags)}] needs Airflow: the tag check was skipped"
    )


def scope_line(policy: Policy) -> str:
    """What plan and the pull-request comment say of the scope."""
    if policy.scope is None:
        return f"scope: not set in {where(policy)} (every DAG; set `scope` to bound this repository)"
    return f"scope: {policy.scope.text()} ({where(policy)})"


EVERY_DAG = Scope(("*",))  # what a policy without `scope` may touch


def conflict(login: str, scope: Scope, recorded: Mapping[str, str]) -> tuple[str, str] | None:
    """Another Airflow login recorded in the same store whose scope overlaps this one, and what both may touch
    (None: none does). A row this release cannot read counts as every DAG (fail closed)."""
    for other in sorted(recorded):
        if other == login:
            continue
        theirs = scope_from_json(recorded[other]) or EVERY_DAG
        shared = scope.overlap(theirs)
        if shared is not None:
            return other, shared
    return None
