"""The project's layering contracts, checked by import-linter on every run.

- tuner/ (the core) never imports Textual or tui/;
- neither tuner/ nor tui/ imports torch, vllm or transformers in-process;
- faces (tui, tuner.cli) over the application layer (tuner.lab) over the core, in
  layers; sibling packages acyclic; tui takes decisions only from tuner.lab;
- and, walked here over every import, no module import cycle at all.
"""

from __future__ import annotations

import subprocess
import sys
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
