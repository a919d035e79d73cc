"""The README's commands are tunelab's (issue 28).

Every ``tunelab COMMAND [SUBCOMMAND]`` it names (code blocks and inline code)
is a command of the Typer app, and every option written in the same code span
or code-block line belongs to that command; so do the options of a
``benchmarks/*.py`` line.

Each failure names the README's claim.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from tests.support.readme_claims import (
    ROOT,
    Mutation,
    check_fails_on_false_readme,
    cli_root,
    command_claims,
    mutation_ids,
    spans,
    subcommands,
    tokens,
)


def options_of(cmd: Any) -> set[str]:
    names = {"--help"}
    for param in cmd.params:
        names.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    return names


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
            for word in tokens(m.group(2)):
                option = OPTION.match(word)
                if not option or not word.startswith("--"):
                    continue
                seen += 1
                name = option.group(0)
                if f'"{name}"' not in source and f"'{name}'" not in source:
                    problems.append(f"README.md:{span.line}: {m.group(1)} has no option {name}")
    assert seen, "README names no benchmark option (parse broken?)"
    assert not problems, "\n".join(problems)


# ---- each check fails on a false README -------------------------------------------------------

MUTATIONS: list[Mutation] = [
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
]


@pytest.mark.parametrize(
    ("check", "true", "false", "named"), MUTATIONS, ids=mutation_ids(MUTATIONS)
)
def test_each_check_fails_on_a_false_readme(
    monkeypatch: pytest.MonkeyPatch, check: Any, true: str, false: str, named: str
) -> None:
    check_fails_on_false_readme(monkeypatch, check, true, false, named)
