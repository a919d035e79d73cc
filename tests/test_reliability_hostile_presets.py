"""Hostile preset files through ``tunelab export``: each refused with a clear message and
nothing written, or accepted and then provably inert when its scripts run.

The corpus and the judge live in ``tests/support/fault_corpus.py`` (also
used by ``benchmarks/fault_loops.py`` for the figures). Accepted cases are
executed by bash with recording stand-ins for ``vllm`` and ``docker``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.fault_corpus import CANARY, corpus, judge

CASES = {case.name: case for case in corpus()}


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_preset_is_refused_or_inert(name: str, tmp_path: Path) -> None:
    verdict = judge(CASES[name], tmp_path)
    assert not verdict.unsafe, "\n".join(verdict.problems)
    assert not verdict.unclear, "\n".join(verdict.unclear)
    if CASES[name].must_refuse:
        assert verdict.refused


def test_corpus_covers_the_issue_list() -> None:
    """Every kind of hostile input the reliability issue names has cases."""
    names = " ".join(CASES)
    for kind in (
        "malformed",
        "wrong-type",
        "unknown",
        "huge",
        "nest",
        "ld-preload",
        "secret",
        "injection",
        "newline",
        "nul",
        "quotes",
    ):
        assert kind in names, kind
    assert sum(c.must_refuse for c in CASES.values()) >= 25
    assert sum(not c.must_refuse for c in CASES.values()) >= 10


@pytest.mark.parametrize(
    "name", ["malformed-toml", "ld-preload", "secret-hf-token", "nul-raw", "deep-nesting-5000"]
)
def test_presets_check_refuses_with_a_clear_message(name: str, tmp_path: Path) -> None:
    import typer

    from tuner.cli import presets as presets_cli

    app = typer.Typer()
    presets_cli.register(app)
    path = tmp_path / "p.toml"
    path.write_bytes(CASES[name].data)
    result = CliRunner().invoke(app, ["presets", "check", str(path)], env={"HF_TOKEN": CANARY})
    assert result.exit_code not in (0, None), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {type(result.exception).__name__}: {result.exception}"
    )
    assert str(path) in result.output or "p.toml" in result.output, result.output
    assert CANARY not in result.output
