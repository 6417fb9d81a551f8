"""Spec names across a tree (pure): unique among the files read, and across the whole specs tree when only some
files are validated (pre-commit)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic


def check_names_in_tree(loaded: Sequence[LoadedSpec], tree: Mapping[str, Sequence[str]]) -> Iterator[Diagnostic]:
    """Names are unique across the whole specs tree, also when only some files are validated (pre-commit)."""
    checked = {item.spec.path for item in loaded}
    for item in loaded:
        for other in tree.get(item.spec.name, ()):
            if other not in checked:
                yield Diagnostic(
                    item.at("name"),
                    f"name {item.spec.name!r} is already used by {other}",
                    "every spec needs a unique name across the specs tree",
                )


def check_unique_names(loaded: Sequence[LoadedSpec]) -> Iterator[Diagnostic]:
    first: dict[str, LoadedSpec] = {}
    for item in sorted(loaded, key=lambda i: i.spec.path):
        seen = first.setdefault(item.spec.name, item)
        if seen is not item:
            yield Diagnostic(
                item.at("name"),
                f"name {item.spec.name!r} is already used by {seen.at('name')}",
                "every spec needs a unique name",
            )
