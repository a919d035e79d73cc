"""The project's layering contracts, checked by import-linter on every run.

- tuner/ (the core) never imports Textual or tui/;
- neither tuner/ nor tui/ imports torch, vllm or transformers in-process;
- faces (tui, tuner.cli) over the application layer (tuner.lab) over the core, in
  layers; sibling packages acyclic; tui takes decisions only from tuner.lab;
- and, walked here over every import, no module import cycle at all;
- no function in tuner/ or tui/ over 80 lines (issue 12: one job per function);
- no ``except ImportError`` around tunelab's own modules (a broken module must
  fail loudly, not switch to a hidden fallback copy).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(exe)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


# Known import cycles, each with its owner; an entry that is no longer a cycle fails the
# test too, so the list only shrinks. Keep it empty.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def _cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_import_graph_of_tuner_and_tui_has_no_cycle() -> None:
    """Every import between tunelab's modules (function-local ones included) points one way."""
    graph = grimp.build_graph("tuner", "tui")
    cycles = _cycles(graph)
    unknown = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not unknown, f"import cycles: {unknown}"
    stale = [owner for c, owner in KNOWN_CYCLES.items() if c not in cycles]
    assert not stale, f"cycles fixed, remove them from KNOWN_CYCLES: {stale}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The walk above would catch app<->jobs if it came back (checked on a graph built here)."""
    graph = grimp.ImportGraph()
    for name in ("a", "a.app", "a.jobs", "a.util"):
        graph.add_module(name)
    graph.add_import(importer="a.app", imported="a.jobs")
    graph.add_import(importer="a.jobs", imported="a.app")
    graph.add_import(importer="a.jobs", imported="a.util")
    assert _cycles(graph) == [frozenset({"a.app", "a.jobs"})]


# -- function length ------------------------------------------------------------------------

MAX_FUNCTION_LINES = 80

# Functions other helpers are splitting right now (issue 12), each with the reason it is
# still long. An entry that is no longer over the limit fails its own test below, so the
# list only shrinks; empty it as the splits land. A function not named here fails at once.
LONG_FUNCTIONS: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included.

    The count runs from the ``def`` line to the last line of the body, so a
    decorator does not count and a docstring does.
    """
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            end = node.end_lineno if node.end_lineno is not None else node.lineno
            yield name, end - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def _long_functions(root: Path, packages: tuple[str, ...] = ("tuner", "tui")) -> dict[str, int]:
    """``path::qualname`` -> lines for every function over MAX_FUNCTION_LINES."""
    found: dict[str, int] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            rel = path.relative_to(root).as_posix()
            for name, lines in _functions(tree):
                if lines > MAX_FUNCTION_LINES:
                    found[f"{rel}::{name}"] = lines
    return found


def test_no_function_in_tuner_or_tui_is_over_80_lines() -> None:
    """A new long function fails here: split it into named helpers (issue 12)."""
    new = {k: n for k, n in _long_functions(REPO).items() if k not in LONG_FUNCTIONS}
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines (split them): {new}"


def test_the_long_function_allowlist_only_shrinks() -> None:
    """An allowlisted function that is now short (or gone) must leave LONG_FUNCTIONS."""
    long_now = _long_functions(REPO)
    stale = sorted(k for k in LONG_FUNCTIONS if k not in long_now)
    assert not stale, f"split already, remove from LONG_FUNCTIONS: {stale}"


def test_the_length_check_finds_a_long_function(tmp_path: Path) -> None:
    """The walk sees top-level functions, methods and nested functions, and counts lines."""
    body = [f"x{i} = {i}" for i in range(MAX_FUNCTION_LINES)]

    def block(head: str, lines: list[str], depth: int) -> list[str]:
        return ["    " * (depth - 1) + head, *("    " * depth + line for line in lines)]

    source = [
        *block("def long():", body, 1),
        *block("def short():", ["return 1"], 1),
        "class K:",
        "    @property",
        *block("def method(self):", body, 2),
        *block("def outer():", block("def inner():", body, 1), 1),
    ]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("\n".join(source) + "\n", encoding="utf-8")
    found = _long_functions(tmp_path, ("pkg",))
    assert found == {
        "pkg/mod.py::long": MAX_FUNCTION_LINES + 1,
        "pkg/mod.py::K.method": MAX_FUNCTION_LINES + 1,
        "pkg/mod.py::outer": MAX_FUNCTION_LINES + 2,
        "pkg/mod.py::outer.inner": MAX_FUNCTION_LINES + 1,
    }


# -- ImportError guards ---------------------------------------------------------------------

# Guards allowed for a stated reason (none today); an entry goes when its guard does.
IMPORT_GUARDS: dict[str, str] = {}

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in _IMPORT_ERRORS for k in kinds)


def _imports_own_module(nodes: list[ast.stmt], own: tuple[str, ...]) -> bool:
    for node in (n for stmt in nodes for n in ast.walk(stmt)):
        if isinstance(node, ast.ImportFrom):
            if node.level > 0 or (node.module or "").split(".")[0] in own:
                return True
        elif isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] in own for alias in node.names
        ):
            return True
    return False


def _import_guards(root: Path, packages: tuple[str, ...] = ("tuner", "tui")) -> set[str]:
    """``path::function`` of every try that imports tunelab's own code and catches ImportError."""
    found: set[str] = set()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            rel = path.relative_to(root).as_posix()
            owner = {
                id(inner): fn.name
                for fn in ast.walk(tree)
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
                for inner in ast.walk(fn)
            }
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Try)
                    and any(_catches_import_error(h) for h in node.handlers)
                    and _imports_own_module(node.body, packages)
                ):
                    found.add(f"{rel}::{owner.get(id(node), '<module>')}")
    return found


def test_no_import_error_guard_around_tunelabs_own_modules() -> None:
    """tunelab's own modules are always importable; a guard would only hide a real breakage."""
    guards = _import_guards(REPO)
    new = sorted(guards - IMPORT_GUARDS.keys())
    assert not new, f"except ImportError around tunelab's own imports (import directly): {new}"
    gone = sorted(IMPORT_GUARDS.keys() - guards)
    assert not gone, f"guard removed, drop it from IMPORT_GUARDS: {gone}"


def test_the_guard_check_finds_a_guard(tmp_path: Path) -> None:
    """A guard around an own import is found; one around a third-party import is not."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "def own():\n"
        "    try:\n"
        "        from pkg.other import x\n"
        "    except (ValueError, ImportError):\n"
        "        x = None\n"
        "    return x\n\n"
        "def third_party():\n"
        "    try:\n"
        "        import amdsmi\n"
        "    except ModuleNotFoundError:\n"
        "        return None\n"
        "    return amdsmi\n",
        encoding="utf-8",
    )
    assert _import_guards(tmp_path, ("pkg",)) == {"pkg/mod.py::own"}
