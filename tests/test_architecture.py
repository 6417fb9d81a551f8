"""The shape of the code that import-linter's contracts do not check: no import cycles between controller modules
(imports inside functions and under TYPE_CHECKING count: they are cycles too, only later), and a mutation gate that
still mutates every module it names."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]

# Cycles issue 22 removes with the store façade and `make_client`'s new home; each goes from this list when it goes.
KNOWN_CYCLES: set[frozenset[str]] = set()  # none left: a new one fails, and this list may only shrink


def cycles(edges: Mapping[str, Iterable[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), and modules importing
    themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.add(frozenset(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set[str]()}
    assert cycles(edges) == {frozenset("abc"), frozenset("e")}
    assert cycles({"a": {"b"}, "b": set[str]()}) == set()


def test_no_import_cycles_in_controller() -> None:
    graph = grimp.build_graph("controller", exclude_type_checking_imports=False, cache_dir=None)
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    found = cycles(edges)
    new = sorted(sorted(c) for c in found - KNOWN_CYCLES)
    assert not new, f"import cycles: {new}"
    gone = sorted(sorted(c) for c in KNOWN_CYCLES - found)
    assert not gone, f"these cycles are gone: take them out of KNOWN_CYCLES: {gone}"


def test_the_mutation_gate_mutates_modules_that_exist() -> None:
    """A path left behind by a move would make mutmut mutate nothing there, and the gate would pass."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    missing = [path for path in config["only_mutate"] if not (REPO / path).is_file()]
    assert not missing, f"[tool.mutmut] only_mutate names files that do not exist: {missing}"
    tests = [path for path in config["pytest_add_cli_args_test_selection"] if not (REPO / path).exists()]
    assert not tests, f"[tool.mutmut] runs tests that do not exist: {tests}"
