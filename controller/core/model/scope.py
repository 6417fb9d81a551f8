"""A specs repository's scope (policy `scope`): the DAGs it may touch, by id glob or by Airflow DAG tag (pure).

Several teams share one Airflow: each team's specs repository names its scope, its controller runs with its own
Airflow login and its own store. A DAG is in scope when one of `dags` (shell-style globs) matches its id, or when
it carries one of `tags` (Airflow's DAG tags, which only Airflow knows: without them the answer is "unknown").
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatchcase

_WILD = "*?["
_STOPS = "*?[]"  # where a glob's literal head ends, read forwards or (its tail) backwards


@dataclass(frozen=True, slots=True)
class Scope:
    dags: tuple[str, ...] = ()  # dag_id globs
    tags: tuple[str, ...] = ()  # Airflow DAG tags

    def by_id(self, dag_id: str) -> bool:
        """One of the globs matches the DAG's id."""
        return any(fnmatchcase(dag_id, glob) for glob in self.dags)

    def covers(self, dag_id: str, tags: Collection[str] | None) -> bool | None:
        """Whether the DAG is in scope; None: only its tags could tell, and they are not known (`tags` None)."""
        if self.by_id(dag_id):
            return True
        if not self.tags:
            return False
        if tags is None:
            return None
        return any(tag in self.tags for tag in tags)

    def text(self) -> str:
        """As plans, refusals and status say it: `dags [a, b_*], tags [finance]`."""
        parts = [
            f"{what} [{', '.join(values)}]" for what, values in (("dags", self.dags), ("tags", self.tags)) if values
        ]
        return ", ".join(parts) or "nothing"

    def overlap(self, other: Scope) -> str | None:
        """What two scopes may both cover (None: they are disjoint): a tag both name, or two globs some DAG id could
        match at once. Globs are compared by their literal head and tail (conservative: `a*` and `*b` overlap);
        a tag scope and a glob scope are never compared, as only Airflow knows which DAGs carry a tag."""
        shared = sorted(set(self.tags) & set(other.tags))
        if shared:
            return f"tag {shared[0]}"
        for mine in self.dags:
            for theirs in other.dags:
                if globs_overlap(mine, theirs):
                    return f"dags {mine} and {theirs}" if mine != theirs else f"dags {mine}"
        return None

    def to_json(self) -> str:
        return json.dumps({"dags": list(self.dags), "tags": list(self.tags)})


def scope_from_json(text: str) -> Scope | None:
    """A scope as `to_json` wrote it; None for anything else (a store row written by something newer)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    dags, tags = data.get("dags", []), data.get("tags", [])
    if not all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in (dags, tags)):
        return None
    return Scope(tuple(dags), tuple(tags))


def globs_overlap(first: str, second: str) -> bool:
    """Whether some string may match both globs: equal, one matches the other as a literal, or (with wildcards)
    their literal heads and tails agree as far as both go. Errs towards True."""
    if first == second or fnmatchcase(first, second) or fnmatchcase(second, first):
        return True
    plain = [g for g in (first, second) if not any(c in g for c in _WILD)]
    if plain:
        return False  # a literal id matches the other glob or nothing does
    heads = [_literal_head(g) for g in (first, second)]
    tails = [_literal_head(g[::-1]) for g in (first, second)]
    return _agree(*heads) and _agree(*tails)


def _literal_head(glob: str) -> str:
    """The characters before the first wildcard or set bracket (of a reversed glob: its tail, reversed)."""
    stops = [i for i, c in enumerate(glob) if c in _STOPS]
    return glob[: min(stops)] if stops else glob


def _agree(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)
