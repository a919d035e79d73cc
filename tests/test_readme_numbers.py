"""The README's numbers are the code's (issue 28).

Its numbers about the test suite and the catalogue (engine tests, fast tests,
a test file's cases, hostile corpora, knobs, rules) are the code's; every
count of tests it gives is checked; every row of the Figures table names its
command.

Each failure names the README's claim.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.readme_claims import (
    ROOT,
    Mutation,
    check_fails_on_false_readme,
    line_of,
    mutation_ids,
    readme,
    section,
    table_rows,
)

PYTEST_COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]


@cache
def collected() -> dict[str, list[str]]:
    """Node ids of the suite, by marker: {'engine': [...], 'not engine': [...]}."""
    procs = {
        marker: subprocess.Popen(
            [*PYTEST_COLLECT, "-m", marker],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for marker in ("engine", "not engine")
    }
    out = {}
    for marker, proc in procs.items():
        text, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"collecting -m {marker!r} failed:\n{text[-3000:]}"
        out[marker] = [line for line in text.splitlines() if "::" in line]
    return out


def spaced(pattern: str) -> re.Pattern[str]:
    """A pattern whose spaces match any whitespace: the README wraps its lines anywhere."""
    return re.compile(pattern.replace(" ", r"\s+"))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _number_claims() -> list[tuple[re.Pattern[str], Any, str]]:
    """(pattern with one number group, the code's value or a checker, what it is)."""

    def engine() -> int:
        return len(collected()["engine"])

    def fast() -> int:
        return len(collected()["not engine"])

    def knobs() -> int:
        from tuner.knobs import KNOBS

        return len(KNOBS)

    def rules() -> int:
        from tuner.rules import RULES

        return len(RULES)

    def presets() -> int:
        from tests.support.fault_corpus import corpus

        return len(corpus())

    def cli_values() -> int:
        import tempfile

        from tests.support.fault_cli import bad_cases

        with tempfile.TemporaryDirectory() as tmp:
            return len(bad_cases(Path(tmp)))

    def argv_configs() -> int:
        from tests.test_export_argv_vllm import corpus

        return len(corpus())

    return [
        (spaced(r"(\d+) tests marked `engine`"), engine, "tests marked engine"),
        (spaced(r"runs only the (\d+) that start"), engine, "engine tests"),
        (spaced(r"fast tests alone \(about ([\d,]+) tests\)"), fast, "about: fast tests"),
        (spaced(r"\((\d+) knobs"), knobs, "knobs in the catalogue"),
        (spaced(r"(\d+) rules\b"), rules, "rules"),
        (spaced(r"(\d+) preset files"), presets, "hostile preset corpus"),
        (spaced(r"(\d+) bad CLI values"), cli_values, "bad CLI values"),
        (spaced(r"(\d+) inputs \("), lambda: presets() + cli_values(), "hostile inputs"),
        (spaced(r"(\d+) hostile configs"), argv_configs, "configs through vLLM's parser"),
    ]


def test_numbers_about_the_suite_and_the_catalogue_are_the_codes() -> None:
    problems, checked = [], 0
    for pattern, value, what in _number_claims():
        matches = list(pattern.finditer(readme()))
        assert matches, f"README no longer says {pattern.pattern!r} ({what}): update this test"
        for m in matches:
            claimed, actual = _int(m.group(1)), value()
            checked += 1
            close = abs(claimed - actual) <= 0.1 * actual if "about" in what else claimed == actual
            if not close:
                where = f"README.md:{line_of(m.start())}"
                problems.append(f"{where}: {m.group(0)!r} ({what}): the code has {actual}")
    assert checked
    assert not problems, "\n".join(problems)


FILE_COUNT = re.compile(r"`(tests/[\w/]+\.py)`\s+\((\d+)\b")


def test_a_test_files_count_is_its_collected_tests() -> None:
    """`tests/x.py` (40 cases ...): pytest collects 40 from it."""
    per_file = Counter(node.split("::")[0] for nodes in collected().values() for node in nodes)
    problems = []
    for m in FILE_COUNT.finditer(readme()):
        path, claimed = m.group(1), int(m.group(2))
        if per_file[path] != claimed:
            problems.append(
                f"README.md:{line_of(m.start())}: {path} has {per_file[path]} tests, not {claimed}"
            )
    assert not problems, "\n".join(problems)


def test_every_count_of_tests_is_checked() -> None:
    """A new 'N ... tests' sentence needs a check here: none goes unchecked."""
    covered = {
        line_of(m.start(1))
        for pattern, _, _ in _number_claims()
        for m in pattern.finditer(readme())
    } | {line_of(m.start()) for m in FILE_COUNT.finditer(readme())}
    loose = [
        f"README.md:{line_of(m.start())}: {m.group(0)!r}"
        for m in re.finditer(r"\b\d[\d,]*\s+(?:[\w`-]+\s+){0,2}(?:tests|cases)\b", readme())
        if line_of(m.start()) not in covered
    ]
    assert not loose, "counts of tests no check covers:\n" + "\n".join(loose)


def test_every_figure_names_its_command() -> None:
    rows = table_rows(section("Figures"), "| what | figure | command |")
    problems = []
    for i, cells in enumerate(rows):
        what, command = cells[0], cells[2] if len(cells) > 2 else ""
        if command == "same" and i:
            continue
        if not re.search(r"`[^`]+`|docs/", command):
            problems.append(f"figure {what!r}: names no command ({command!r})")
    assert not problems, "\n".join(problems)


# ---- each check fails on a false README -------------------------------------------------------

MUTATIONS: list[Mutation] = [
    (
        test_numbers_about_the_suite_and_the_catalogue_are_the_codes,
        "15 tests\nmarked",
        "16 tests\nmarked",
        "16 tests",
    ),
    (
        test_numbers_about_the_suite_and_the_catalogue_are_the_codes,
        "52 rules",
        "50 rules",
        "50 rules",
    ),
    (
        test_numbers_about_the_suite_and_the_catalogue_are_the_codes,
        "about 2,900 tests",
        "about 1,400 tests",
        "1,400",
    ),
    (test_a_test_files_count_is_its_collected_tests, "(40 cases", "(39 cases", "not 39"),
    (
        test_every_count_of_tests_is_checked,
        "## Tests\n",
        "## Tests\n\nIt has 99 slow tests.\n",
        "99 slow tests",
    ),
    (
        test_every_figure_names_its_command,
        "| `.venv/bin/python benchmarks/sampler_cost.py` |",
        "| |",
        "sampler",
    ),
]


@pytest.mark.parametrize(
    ("check", "true", "false", "named"), MUTATIONS, ids=mutation_ids(MUTATIONS)
)
def test_each_check_fails_on_a_false_readme(
    monkeypatch: pytest.MonkeyPatch, check: Any, true: str, false: str, named: str
) -> None:
    check_fails_on_false_readme(monkeypatch, check, true, false, named)
