"""The shape of the code that import-linter's contracts do not check: no import cycles between controller modules
(imports inside functions and under TYPE_CHECKING count: they are cycles too, only later), no module over 450 lines or
class over 250 (a longer one holds more than one concept), and a mutation gate that still mutates every module it
names."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]

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


MODULE_LINES = 450  # the one-concept size rule: a module or class longer than these holds more than one
CLASS_LINES = 250


def too_long(text: str, name: str) -> list[str]:
    """The module (`text`, named `name`) if it is longer than MODULE_LINES, and each class in it longer than
    CLASS_LINES, with their sizes."""
    found: list[str] = []
    lines = len(text.splitlines())
    if lines > MODULE_LINES:
        found.append(f"{name}: {lines} lines (module limit {MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=name)):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            size = node.end_lineno - node.lineno + 1
            if size > CLASS_LINES:
                found.append(f"{name}:{node.lineno}: class {node.name}: {size} lines (class limit {CLASS_LINES})")
    return found


def test_the_size_check_names_a_long_class_and_a_long_module() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(CLASS_LINES))
    assert too_long(f"class Big:\n{body}", "big.py") == [
        f"big.py:1: class Big: {CLASS_LINES + 1} lines (class limit {CLASS_LINES})"
    ]
    assert too_long(f"class Fits:\n{body[: body.rindex('    x')]}", "fits.py") == []
    assert too_long("x = 1\n" * (MODULE_LINES + 1), "long.py") == [
        f"long.py: {MODULE_LINES + 1} lines (module limit {MODULE_LINES})"
    ]
    assert too_long("x = 1\n" * MODULE_LINES, "fits.py") == []


def test_no_module_or_class_under_controller_is_too_long() -> None:
    found = [
        line
        for path in sorted((REPO / "controller").rglob("*.py"))
        for line in too_long(path.read_text(), path.relative_to(REPO).as_posix())
    ]
    assert not found, "split these by concept:\n" + "\n".join(found)


# opens the store without `runtime.session.open_store`, each for its import cost: a shell completion and `validate`'s
# read of resumes (pre-commit) import no HTTP client
STORE_OPENED_DIRECTLY = {"controller/cli/complete.py", "controller/commands/verbs/validate.py"}


def test_the_store_is_opened_in_one_place() -> None:
    """`Store(...)` is constructed by `runtime.session.open_store` (the settings' URL and audit keys, one way) and
    the listed light paths only: a new construction that forgets the key or the previous keys cannot come back."""
    found = set()
    for path in sorted((REPO / "controller").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Store":
                found.add(str(path.relative_to(REPO)))
    assert found == {"controller/commands/runtime/session.py", *STORE_OPENED_DIRECTLY}
