"""Preset schema validation: each mistake is named by key and line, with a fix.

Every test writes a small preset text with one defect and checks that loading
refuses it with an issue pointing at the right key and line, or, for the
allowed cases, that it loads to the expected config.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.export.errors import PresetError, Severity
from tuner.export.preset import MAX_PRESET_BYTES, load_preset, loads_preset
from tuner.export.validate import validate_text

BASE = """\
[preset]
name = "t"
schema_version = 1

[target]
model = "org/model"
platform = "rocm"

[env]
VLLM_ROCM_USE_AITER = "1"

[engine]
max-num-batched-tokens = 8192
"""


def errors_of(text: str, **kwargs) -> list:
    result = validate_text(text, **kwargs)
    assert result.preset is None, "expected the preset to be refused"
    return result.errors


def line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_base_loads() -> None:
    preset = loads_preset(BASE, resolve=False)
    assert preset.config.model == "org/model"
    assert preset.config.env == {"VLLM_ROCM_USE_AITER": "1"}
    assert preset.config.engine == {"max-num-batched-tokens": 8192}


def test_wrong_type_names_key_line_and_fix() -> None:
    text = BASE.replace("= 8192", '= "lots"')
    (issue,) = errors_of(text)
    assert issue.key == "engine.max-num-batched-tokens"
    assert issue.line == line_of(text, "max-num-batched-tokens")
    assert "whole number" in issue.message
    assert "no quotes" in issue.fix
    formatted = issue.format("p.toml")
    assert formatted.startswith(f"p.toml:{issue.line}: error: engine.max-num-batched-tokens:")


def test_out_of_range_uses_catalogue_bounds() -> None:
    text = BASE + "gpu-memory-utilization = 1.5\n"
    (issue,) = errors_of(text)
    assert issue.key == "engine.gpu-memory-utilization"
    assert "out of range" in issue.message


def test_bad_choice_lists_allowed_values() -> None:
    text = BASE + 'cudagraph-mode = "SOMETIMES"\n'
    (issue,) = errors_of(text)
    assert "FULL_AND_PIECEWISE" in issue.message
    assert issue.line == line_of(text, "cudagraph-mode")


def test_choice_case_is_folded_to_the_canonical_value() -> None:
    preset = loads_preset(BASE + 'cudagraph-mode = "full"\n', resolve=False)
    assert preset.config.engine["cudagraph-mode"] == "FULL"


def test_switch_needs_a_boolean() -> None:
    (issue,) = errors_of(BASE + "enforce-eager = 1\n")
    assert "true or false" in issue.message


def test_typo_of_a_catalogue_key_is_an_error_with_suggestion() -> None:
    text = BASE + "max-num-batched-token = 4\n"
    (issue,) = errors_of(text)
    assert issue.key == "engine.max-num-batched-token"
    assert "max-num-batched-tokens" in issue.fix
    assert issue.line == line_of(text, "max-num-batched-token =")


def test_vllm_flag_outside_catalogue_passes_with_a_warning() -> None:
    result = validate_text(BASE + 'served-model-name = " x "\nseed = 3\n')
    assert result.preset is not None
    assert result.preset.config.engine["served-model-name"] == " x "
    assert [w.key for w in result.warnings] == ["engine.served-model-name", "engine.seed"]
    assert result.warnings[0].severity is Severity.WARNING


def test_flag_vllm_does_not_have_needs_allow_code() -> None:
    """What tunelab cannot tell to be data is refused; --allow-code passes it, still named."""
    (issue,) = errors_of(BASE + 'some-future-flag = " x "\n')
    assert issue.key == "engine.some-future-flag" and "--allow-code" in issue.fix
    result = validate_text(BASE + 'some-future-flag = " x "\n', allow_code=True)
    assert result.preset is not None
    assert result.preset.config.engine["some-future-flag"] == " x "
    assert "engine.some-future-flag" in [w.key for w in result.warnings]


def test_underscore_key_is_refused_with_the_dashed_form() -> None:
    (issue,) = errors_of(BASE + "max_num_seqs = 4\n")
    assert "max-num-seqs" in issue.fix


def test_unknown_table_and_key() -> None:
    text = BASE.replace("[engine]", "[engnie]")
    issues = errors_of(text)
    assert issues[0].key == "engnie"
    assert "[engine]" in issues[0].fix
    assert issues[0].line == line_of(text, "[engnie]")
    text = BASE.replace('name = "t"', 'name = "t"\nnmae = "x"')
    (issue,) = errors_of(text)
    assert issue.key == "preset.nmae"
    assert "'name'" in issue.fix
    assert issue.line == line_of(text, "nmae")


def test_missing_required_fields() -> None:
    issues = errors_of("[preset]\nname = 't'\n")
    messages = " | ".join(i.message for i in issues)
    assert "schema_version" in messages
    assert "[target] table is missing" in messages


def test_reserved_engine_keys() -> None:
    (issue,) = errors_of(BASE + "port = 9000\n")
    assert issue.key == "engine.port"
    assert "PORT" in issue.fix


def test_newer_schema_version() -> None:
    (issue,) = errors_of(BASE.replace("schema_version = 1", "schema_version = 2"))
    assert "upgrade tunelab" in issue.fix


def test_invalid_toml_reports_the_line() -> None:
    text = BASE.replace("max-num-batched-tokens = 8192", "max-num-batched-tokens = ")
    (issue,) = errors_of(text)
    assert "not valid TOML" in issue.message
    assert issue.line == line_of(text, "max-num-batched-tokens")


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "HSA_TOOLS_LIB",
        "NCCL_NET_PLUGIN",
        "OMP_TOOL_LIBRARIES",
        "EDITOR",
    ],
)
def test_code_running_env_is_refused_unless_allowed(name: str) -> None:
    text = BASE.replace(
        'VLLM_ROCM_USE_AITER = "1"', f'VLLM_ROCM_USE_AITER = "1"\n{name} = "/tmp/evil.so"'
    )
    (issue,) = errors_of(text)
    assert issue.key == f"env.{name}"
    assert f"--allow-env {name}" in issue.fix
    assert issue.line == line_of(text, f"{name} =")
    preset = loads_preset(text, resolve=False, allow_env=(name,))
    assert preset.config.env[name] == "/tmp/evil.so"


@pytest.mark.parametrize(
    "name", ["HF_TOKEN", "GITHUB_TOKEN", "VLLM_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"]
)
def test_secrets_are_refused_even_when_allowed(name: str) -> None:
    text = BASE.replace('VLLM_ROCM_USE_AITER = "1"', f'{name} = "s3cr3t"')
    (issue,) = errors_of(text, allow_env=(name,))
    assert "secret" in issue.message
    assert "export it in the shell" in issue.fix


def test_tuning_variables_with_token_in_the_name_are_not_secrets() -> None:
    text = BASE.replace(
        'VLLM_ROCM_USE_AITER = "1"', 'VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD = "1024"'
    )
    assert loads_preset(text, resolve=False).config.env == {
        "VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD": "1024"
    }


def test_env_values_are_normalised_like_set() -> None:
    text = BASE.replace(
        'VLLM_ROCM_USE_AITER = "1"', "VLLM_ROCM_USE_AITER = true\nNCCL_MIN_NCHANNELS = 112"
    )
    preset = loads_preset(text, resolve=False)
    assert preset.config.env == {"VLLM_ROCM_USE_AITER": "1", "NCCL_MIN_NCHANNELS": "112"}


def test_env_switch_with_nonsense_value() -> None:
    (issue,) = errors_of(BASE.replace('VLLM_ROCM_USE_AITER = "1"', 'VLLM_ROCM_USE_AITER = "maybe"'))
    assert issue.key == "env.VLLM_ROCM_USE_AITER"
    assert "switch" in issue.message


def test_nul_bytes_are_refused() -> None:
    (issue,) = errors_of(BASE.replace('"org/model"', '"org/\\u0000model"'))
    assert issue.key == "target.model"
    assert "NUL" in issue.message
    (issue,) = errors_of(BASE + "\x00")
    assert "NUL" in issue.message


def test_nesting_limit() -> None:
    deep = "compilation-config = " + "{ a = " * 12 + "1" + " }" * 12 + "\n"
    issues = errors_of(BASE + deep)
    assert any("nested deeper" in i.message for i in issues)


def test_size_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text(BASE + "#" * (MAX_PRESET_BYTES + 10) + "\n")
    with pytest.raises(PresetError) as info:
        load_preset(big, resolve=False)
    assert "larger than 1024 KiB" in str(info.value)


def test_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(BASE.encode() + b"\n# \xff\xfe\n")
    with pytest.raises(PresetError) as info:
        load_preset(bad, resolve=False)
    assert "not UTF-8" in str(info.value)
    assert "bad.toml:15" in str(info.value)


def test_all_errors_are_reported_at_once() -> None:
    text = BASE.replace("= 8192", '= "x"') + "enforce-eager = 3\nport = 1\n"
    keys = {i.key for i in errors_of(text)}
    assert keys == {"engine.max-num-batched-tokens", "engine.enforce-eager", "engine.port"}


def test_error_message_lists_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(BASE.replace("= 8192", "= true"))
    with pytest.raises(PresetError) as info:
        load_preset(path, resolve=False)
    text = str(info.value)
    assert f"{path}:13: error: engine.max-num-batched-tokens:" in text
    assert "Fix:" in text


def test_compilation_config_json_string_becomes_a_table() -> None:
    preset = loads_preset(
        BASE + 'compilation-config = \'{"cudagraph_mode": "FULL"}\'\n', resolve=False
    )
    assert preset.config.engine["compilation-config"] == {"cudagraph_mode": "FULL"}


def test_edited_after_export_warns() -> None:
    text = BASE + '\n[provenance]\nconfig_id = "000000000000"\n'
    result = validate_text(text)
    assert result.preset is not None
    (warning,) = [w for w in result.warnings if w.key == "provenance.config_id"]
    assert "edited after export" in warning.fix


def test_unknown_demo_placeholder() -> None:
    (issue,) = errors_of(BASE.replace('"org/model"', '"tunelab:nope"'))
    assert "tunelab:demo" in issue.fix
