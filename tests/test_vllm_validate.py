"""vLLM's own verdict on a config (issue 27 "vLLM's own validation"), from the installed vLLM.

The probe runs the real vLLM CPU build in a subprocess (no engine): these tests are the check
that the tables' derived refusals and vLLM's own validators agree on the same config.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.rules import Target, check
from tuner.vllm_validate import validate


def _demo(demo_model_path: Path, **engine: object) -> EngineConfig:
    return EngineConfig(str(demo_model_path), engine={**DEMO_ENGINE_ARGS, **engine})


def test_vllm_refuses_what_the_table_rule_refuses_in_the_same_words(
    demo_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = _demo(demo_model_path, **{"max-num-batched-tokens": 16})  # below max-num-seqs 64
    answer = validate(bad)
    assert answer.error is None and not answer.ok
    said = "max_num_batched_tokens (16) must be greater than or equal to max_num_seqs (64)."
    assert answer.refusals == [said]
    rule = [
        f for f in check(bad, None, Target("0.32.0", "cpu")) if f.rule == "mbt-below-max-num-seqs"
    ]
    assert rule and said in rule[0].message  # the table's sentence is vLLM's
    finding = answer.findings()[0]
    assert finding.rule == "vllm-validation" and said in finding.message

    good = validate(_demo(demo_model_path))
    assert good.ok and good.refusals == [] and good.vllm_version == "0.32.0"

    # `tunelab check --validate` reports it beside the rules' findings (same config: cached).
    import json

    from typer.testing import CliRunner

    from tui.cli import app

    sets = [a for k, v in bad.engine.items() for a in ("--set", f"{k}={v}")]
    out = CliRunner().invoke(app, ["check", "--model", bad.model, *sets, "--validate", "--json"])
    assert out.exit_code == 1, out.output
    rules = [f["rule"] for f in json.loads(out.stdout)]
    assert "vllm-validation" in rules and "mbt-below-max-num-seqs" in rules

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached answer asked vLLM again")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert validate(bad).refusals == [said]  # from the cache, per config and installation


def test_a_model_vllm_cannot_reach_is_no_verdict_on_the_config() -> None:
    """Offline, a missing path or a bad hub id: a warning that vLLM could not say, never an
    error blaming the config (what the probe answers for an OSError / HFValidationError)."""
    from tuner.rules import Severity
    from tuner.vllm_validate import from_answer

    answer = from_answer(
        {"ok": False, "unreachable": True, "refusals": ["We couldn't connect to the hub"]}
    )
    (finding,) = answer.findings()
    assert finding.severity is Severity.WARNING and "could not read the model" in finding.message
    refused = from_answer(
        {"ok": False, "refusals": ["max_num_seqs: bad"], "vllm_version": "0.32.0"}
    )
    assert refused.findings()[0].severity is Severity.ERROR
