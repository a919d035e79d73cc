"""Count function-local imports in tuner/ and tui/ at a git revision (issue 12's measure).

Imports inside function bodies only (an AST walk), so ``if TYPE_CHECKING:``
blocks and module-level imports are not counted. Prints the total, how many
name tunelab's own modules, and the directories with the most.

    .venv/bin/python scripts/local_imports.py [REV ...]     # default: HEAD
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout


def count(rev: str) -> tuple[int, int, Counter[str]]:
    """(all function-local imports, those of tuner/tui modules, per directory) at ``rev``."""
    names = [
        f
        for f in _git("ls-tree", "-r", "--name-only", rev).split()
        if f.endswith(".py") and f.startswith(("tuner/", "tui/"))
    ]
    total = own = 0
    per: Counter[str] = Counter()
    for name in names:
        tree = ast.parse(_git("show", f"{rev}:{name}"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    total += 1
                    module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                    own += bool(module and module.split(".")[0] in ("tuner", "tui"))
                    per[name.rsplit("/", 1)[0]] += 1
    return total, own, per


def main() -> None:
    for rev in sys.argv[1:] or ["HEAD"]:
        total, own, per = count(rev)
        top = ", ".join(f"{d} {n}" for d, n in per.most_common(5))
        print(f"{rev}: {total} function-local imports, {own} of tunelab modules; {top}")


if __name__ == "__main__":
    main()
