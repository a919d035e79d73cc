"""vLLM's own parser reads exactly the benchmarked arguments from tunelab's argv and scripts.

Comparing tunelab's argv with itself cannot see a value that vLLM parses as
an option (``--served-model-name --trust-remote-code`` turns remote code on).
Here the engine argv (``EngineSpec.argv``, both entries) and the argv an
exported launch script really passes (recorded by a stand-in ``vllm``) are
parsed by vLLM 0.32's ``make_arg_parser`` in one subprocess
(tests/support/vllm_argv_parser.py), and each namespace must differ from the
plain ``vllm serve MODEL`` namespace in exactly the configured arguments,
each holding exactly its configured value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tuner.config import ConfigError, EngineConfig
from tuner.engine.spec import EngineSpec
from tuner.export.script import render_script

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_VALUES = [
    "--trust-remote-code",
    "-O3",
    "-O0",
    "--api-key=stolen",
    "--config=/tmp/evil.yaml",
    "-tp 8",
    "--model=other/model",
    "x --worker-cls evil.W",
    "it's $(touch PWNED) `x`\n--enforce-eager",
    "-",
    "=",
]


def corpus() -> list[EngineConfig]:
    configs = [
        EngineConfig(
            model="org/model",
            engine={"served-model-name": value, "max-num-seqs": 8, "enforce-eager": False},
        )
        for value in HOSTILE_VALUES
    ]
    configs += [
        EngineConfig(model="org/model", engine={"tokenizer": value}) for value in HOSTILE_VALUES
    ]
    configs.append(
        EngineConfig(
            model="./-O0",
            engine={
                "gpu-memory-utilization": 0.5,
                "max-num-batched-tokens": 4096,
                "enable-prefix-caching": True,
                "chat-template": "--trust-remote-code",
                "compilation-config": {"cache_dir": "-O3 --trust-remote-code"},
            },
        )
    )
    return configs


def _parse(argvs: list[list[str]]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.vllm_argv_parser"],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
        cwd=ROOT,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert marker, proc.stderr[-3000:]
    return json.loads(marker[0][2:])


def _recorded_script_argv(config: EngineConfig, work: Path) -> list[str]:
    """Runs the exported launch script with a stand-in ``vllm`` that records its argv."""
    stub = work / "vllm"
    stub.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "open(os.environ['ARGV_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    stub.chmod(0o755)
    script = work / "launch.sh"
    script.write_text(render_script(config, ["# test"]))
    out = work / "argv.json"
    env = {"PATH": "/usr/bin:/bin", "VLLM_BIN": str(stub), "ARGV_OUT": str(out), "PORT": "8123"}
    subprocess.run(["bash", str(script)], cwd=work, env=env, check=True, timeout=30)
    assert not (work / "PWNED").exists()
    return json.loads(out.read_text())


def _expected_dests(config: EngineConfig) -> dict[str, Any]:
    return {key.replace("-", "_"): value for key, value in config.engine.items()}


def _check(ns: dict[str, Any], base: dict[str, Any], config: EngineConfig, where: str) -> None:
    expected = _expected_dests(config)
    changed = {k for k in ns if ns[k] != base.get(k)} - {"host", "port", "model"}
    # Nothing but the configured arguments changed (a value read as an option
    # would change another one), and each holds its configured value below.
    assert changed <= set(expected), f"{where}: vLLM also set {sorted(changed - set(expected))}"
    assert ns["model"] == config.model, where
    assert ns["trust_remote_code"] is False, where
    for dest, value in expected.items():
        got = ns[dest]
        if isinstance(value, dict):
            assert all(str(v) in str(got) for v in value.values()), where
        elif isinstance(value, bool | int | float):
            assert got == value, f"{where}: {dest}={got!r}"
        else:
            assert got in (value, [value]), f"{where}: {dest}={got!r}, configured {value!r}"


def test_vllm_parses_exactly_the_configured_arguments(tmp_path: Path) -> None:
    configs = corpus()
    argvs: list[list[str]] = []
    labels: list[tuple[int, str]] = []
    for i, config in enumerate(configs):
        serve = EngineSpec(config, tmp_path / "log", python="/x/bin/python", entry="serve")
        module = EngineSpec(config, tmp_path / "log", python="/x/bin/python", entry="module")
        argvs.append(serve.argv(8123)[1:])  # drop the vllm binary: "serve MODEL ..."
        labels.append((i, "engine serve"))
        argvs.append(module.argv(8123)[3:])  # drop python -m MODULE
        labels.append((i, "engine module"))
        work = tmp_path / f"case{i}"
        work.mkdir()
        argvs.append(_recorded_script_argv(config, work))
        labels.append((i, "launch script"))
        argvs.append(["serve", config.model])
        labels.append((i, "baseline"))
    results = _parse(argvs)
    for start in range(0, len(results), 4):
        i = labels[start][0]
        base = results[start + 3]
        assert "ns" in base, base
        for offset in range(3):
            result = results[start + offset]
            where = f"case {i} {labels[start + offset][1]} ({argvs[start + offset]!r})"
            assert "ns" in result, f"{where}: {result}"
            _check(result["ns"], base["ns"], configs[i], where)


@pytest.mark.parametrize("model", ["--trust-remote-code", "-O0", "-", "--model=x"])
def test_a_model_starting_with_a_dash_is_refused_with_a_fix(model: str) -> None:
    with pytest.raises(ConfigError, match=r"starts with '-'.*\./"):
        EngineConfig(model=model)


def test_home_relative_model_is_expanded_once() -> None:
    config = EngineConfig(model="~/models/x")
    assert config.model == str(Path.home() / "models" / "x")
    assert config.serve_args()[0] == config.model


@pytest.mark.parametrize(
    ("key", "full"),
    [("gpu-memory-util", "gpu-memory-utilization"), ("max-num-batched", "max-num-batched-tokens")],
)
def test_abbreviated_flags_are_refused(key: str, full: str) -> None:
    with pytest.raises(ConfigError, match=f"abbreviation.*{full}"):
        EngineConfig(model="m", engine={key: 1})


def test_a_lone_double_dash_value_is_refused() -> None:
    # argparse strips "--" even from "--served-model-name=--" (vLLM would get []).
    with pytest.raises(ConfigError, match="cannot be '--'"):
        EngineConfig(model="m", engine={"served-model-name": "--"})
