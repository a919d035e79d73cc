"""EngineConfig: identity, rendering to vllm serve argv/env, KEY=VALUE parsing."""

from __future__ import annotations

import json

import pytest

from tuner.config import ConfigError, EngineConfig, parse_value, split_assignment


def test_config_id_ignores_key_order_and_changes_with_values() -> None:
    a = EngineConfig("m", env={"B": "1", "A": "0"}, engine={"max-num-seqs": 8, "dtype": "auto"})
    b = EngineConfig("m", env={"A": "0", "B": "1"}, engine={"dtype": "auto", "max-num-seqs": 8})
    c = EngineConfig("m", env={"A": "0", "B": "1"}, engine={"dtype": "auto", "max-num-seqs": 9})
    assert a.config_id == b.config_id
    assert a.config_id != c.config_id
    assert len(a.config_id) == 12


def test_engine_args_render_bools_json_and_cudagraph_mode() -> None:
    cfg = EngineConfig(
        "org/model",
        engine={
            "enable-prefix-caching": False,
            "enforce-eager": True,
            "max-num-batched-tokens": 8192,
            "cudagraph-mode": "FULL_AND_PIECEWISE",
            "compilation-config": {"level": 3},
            "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
        },
    )
    args = cfg.engine_args()
    assert "--no-enable-prefix-caching" in args
    assert "--enforce-eager" in args
    # Every value is glued to its flag: one argv word per argument.
    assert all(a.startswith("--") for a in args)
    values = dict(a[2:].split("=", 1) for a in args if "=" in a)
    assert values["max-num-batched-tokens"] == "8192"
    comp = json.loads(values["compilation-config"])
    assert comp == {"level": 3, "cudagraph_mode": "FULL_AND_PIECEWISE"}
    spec = json.loads(values["speculative-config"])
    assert spec["num_speculative_tokens"] == 3
    assert cfg.serve_args()[0] == "org/model"
    assert sum(a.startswith("--compilation-config") for a in args) == 1


def test_with_values_routes_env_and_engine_keys_and_removes_none() -> None:
    cfg = EngineConfig("m", env={"VLLM_ROCM_USE_AITER": "1"}, engine={"max-num-seqs": 8})
    new = cfg.with_values({"VLLM_ROCM_USE_AITER_MHA": False, "max-num-seqs": None, "block-size": 1})
    assert new.env == {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_MHA": "0"}
    assert new.engine == {"block-size": 1}
    assert cfg.engine == {"max-num-seqs": 8}  # the original is untouched


@pytest.mark.parametrize("bad", ["lower_case_env=", "--max-num-seqs", "Max-Seqs"])
def test_invalid_keys_are_refused_with_a_hint(bad: str) -> None:
    with pytest.raises(ConfigError):
        EngineConfig("m", engine={bad: 1})


def test_reserved_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="set by tunelab"):
        EngineConfig("m", engine={"port": 8000})


def test_bad_env_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="not valid"):
        EngineConfig("m", env={"LD PRELOAD": "x"})


def test_parse_value_and_split_assignment() -> None:
    assert parse_value("true") is True
    assert parse_value("64") == 64
    assert parse_value("0.9") == 0.9
    assert parse_value('{"a": 1}') == {"a": 1}
    assert parse_value("FULL") == "FULL"
    assert split_assignment("--max-num-seqs=8") == ("max-num-seqs", "8")
    assert split_assignment("K=a=b") == ("K", "a=b")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        split_assignment("max-num-seqs")
    with pytest.raises(ConfigError, match="not valid"):
        parse_value("{broken")
