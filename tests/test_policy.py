"""The policy as an allowlist: what tunelab knows to be data passes, everything else needs consent.

The cross-face suite (test_policy_entry_points.py) checks that every face asks the policy;
these tests check the policy's own answers against what it is derived from: the catalogue,
the shipped presets and vLLM's own declarations (tuner/vllm_tables).
"""

from __future__ import annotations

import pytest

import tuner.knobs as knobs
from tuner import policy
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.export.catalog import shipped_dir
from tuner.export.preset import load_preset
from tuner.policy import engine_args, env_vars
from tuner.rules import Target, check
from tuner.vllm_tables import is_data, table

NONE = policy.Consent()


def _config(env: dict[str, str] | None = None, **engine: object) -> EngineConfig:
    return EngineConfig("org/m", env=env or {}, engine=dict(engine))


@pytest.mark.parametrize("path", sorted(shipped_dir().glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_preset_is_plain_data(path) -> None:
    assert policy.violations(load_preset(path, resolve=False).config, NONE) == []


def test_the_demo_config_is_plain_data() -> None:
    assert policy.violations(_config(**DEMO_ENGINE_ARGS), NONE) == []


def _valid(knob: knobs.Knob) -> object:
    kind = str(knob.type)
    if kind == "bool":
        return True
    if kind == "choice":
        return knobs.choices_for(knob)[0]
    if kind in ("int", "float"):
        return knob.minimum if knob.minimum is not None else 1
    if kind == "json":
        return {}
    return "0"


@pytest.mark.parametrize("knob", knobs.KNOBS, ids=lambda k: k.key)
def test_every_catalogue_knob_with_a_valid_value_is_data(knob: knobs.Knob) -> None:
    value = _valid(knob)
    config = _config().with_values({knob.key: value})
    assert policy.violations(config, NONE) == []


def test_vllm_variables_are_data_exactly_when_vllm_reads_a_switch_number_or_choice() -> None:
    samples = {"bool": "1", "int": "3", "float": "0.5"}
    checked = 0
    for name, kind in table().env.items():
        if knobs.get(name) is not None or env_vars.is_secret(name):
            continue
        if name in env_vars.VLLM_TEXT_VARIABLES or name in env_vars.LIBRARY_VARIABLES:
            continue
        if name in env_vars.SECURITY_SWITCHES:
            continue
        choices = kind.get("choices") or kind.get("items", {}).get("choices") or ["x"]
        value = samples.get(kind["kind"]) or choices[0]
        refused = env_vars.check(name, value, NONE)
        assert (refused is None) == is_data(kind), (name, kind, refused)
        checked += 1
    assert checked > 250  # the table is vLLM's whole envs.py, not a hand-picked few


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NCCL_DEBUG", "INFO; touch x"),
        ("OMP_NUM_THREADS", "8 && id"),
        ("VLLM_ROCM_USE_AITER", "maybe"),
        ("CUDA_VISIBLE_DEVICES", "0,1 $(id)"),
        ("VLLM_LOGGING_LEVEL", "LOUD"),
    ],
)
def test_a_known_variable_with_a_value_of_the_wrong_shape_is_refused(name: str, value: str) -> None:
    found = env_vars.check(name, value, NONE)
    assert found is not None and found.kind == "env" and f"--allow-env {name}" in found.fix


def test_consent_lifts_code_and_unknown_names_but_never_secrets() -> None:
    config = _config(
        {"LD_PRELOAD": "/x.so", "HF_TOKEN": "hf_x"},
        **{
            "trust-remote-code": True,
            "kv-transfer-config": {"kv_connector_extra_config": {"password": "p"}},
        },
    )
    kinds = sorted(v.kind for v in policy.violations(config, NONE))
    assert kinds == ["code", "code", "env", "secret", "secret"]
    everything = policy.Consent(code=True, env=frozenset({"LD_PRELOAD", "HF_TOKEN"}))
    assert sorted(v.kind for v in policy.violations(config, everything)) == ["secret", "secret"]


def test_the_no_form_of_a_switch_is_data_and_an_unknown_flag_is_not() -> None:
    assert policy.violations(_config(**{"no-enable-prefix-caching": True}), NONE) == []
    (found,) = policy.violations(_config(**{"enable-prefix-cachingg": True}), NONE)
    assert found.kind == "code" and "not an argument" in found.message


def test_a_disable_negation_is_a_switch_where_the_release_declares_it() -> None:
    # vLLM 0.33 declares --enable-x switches with a --disable-x negation; 0.32 has no
    # --disable-prefix-caching, so there it is not an argument at all.
    config = _config(**{"disable-prefix-caching": True})
    assert policy.violations(config, NONE, vllm_version="0.33.0") == []
    (found,) = policy.violations(config, NONE, vllm_version="0.32.0")
    assert "not an argument of vLLM 0.32.0" in found.message


def test_json_text_is_read_as_json_before_it_is_judged() -> None:
    text = '{"mode": 3, "inductor_compile_config": {"cpp.cxx": "/tmp/evil"}}'
    (found,) = policy.violations(_config(**{"compilation-config": text}), NONE)
    assert found.key == "compilation-config.inductor_compile_config"


def test_every_data_field_of_compilation_config_passes() -> None:
    fields = table().config_fields("CompilationConfig")
    data = [name for name, kind in fields.items() if is_data(kind)]
    assert {
        "mode",
        "cudagraph_mode",
        "cudagraph_capture_sizes",
        "use_inductor_graph_partition",
    } <= set(data)
    value = {
        "mode": 3,
        "cudagraph_mode": "FULL",
        "cudagraph_capture_sizes": [1, 2, 4],
        "custom_ops": ["+rms_norm"],
    }
    assert engine_args.check("compilation-config", value, NONE) == []


def test_the_rule_offers_a_fix_that_removes_only_the_refused_field() -> None:
    config = _config(**{"compilation-config": {"mode": 3, "cache_dir": "/tmp/c"}})
    with policy.granting(NONE):
        found = [f for f in check(config, None, Target(), None) if f.rule == "policy"]
    assert len(found) == 1 and found[0].fix == {"compilation-config": {"mode": 3}}
    fixed = config.with_values(found[0].fix)
    assert policy.violations(fixed, NONE) == []


def test_consent_travels_as_flags() -> None:
    consent = policy.Consent(code=True, env=frozenset({"B", "A"}))
    assert consent.flags() == ["--allow-code", "--allow-env", "A", "--allow-env", "B"]
    assert policy.Consent().flags() == []


def test_an_unknown_nested_key_says_vllm_refuses_it_and_names_the_nearest_field() -> None:
    """Issue 27: 0.32's CompilationConfig has no ``level`` (it became ``mode``); vLLM's config
    classes forbid unknown keys, so the engine would refuse what the policy refuses."""
    level = EngineConfig("m", engine={"compilation-config": {"level": 3}})
    found = policy.violations(level)
    assert found and "vLLM refuses unknown keys at start" in found[0].message
    typo = EngineConfig("m", engine={"compilation-config": {"cudagraph_mod": "FULL"}})
    assert "did you mean cudagraph_mode?" in policy.violations(typo)[0].message
