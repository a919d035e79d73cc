"""The shipped presets: each loads, cites its sources, and cpu-demo equals the embedded default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.cpu_demo import DEMO_MODEL_ALIAS, demo_config
from tuner.export.catalog import find_preset, list_presets, shipped_dir
from tuner.export.errors import PresetError
from tuner.export.preset import DEMO_MODEL_PLACEHOLDER, load_preset
from tuner.export.validate import validate_text

REFERENCE = Path("/work/shared/reference")
EXPECTED = {
    "awq",
    "cpu-demo",
    "deepseek-dp8-ep",
    "dense-low-latency",
    "dense-throughput",
    "fp8-kv-cache",
    "gpt-oss",
    "mla-deepseek",
    "moe-mixtral",
}


def test_all_expected_presets_are_shipped() -> None:
    entries = list_presets()
    shipped = {e.name for e in entries if e.origin == "shipped"}
    assert shipped == EXPECTED
    assert all(e.error == "" for e in entries)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_loads_and_cites_sources(name: str) -> None:
    path = find_preset(name)
    assert path.name == f"{name}.toml"
    text = path.read_text()
    result = validate_text(text)
    assert result.errors == []
    preset = result.preset
    assert preset.name == name
    assert preset.provenance.sources, "every shipped preset names its reference sections"
    for source in preset.provenance.sources:
        assert "§" in source
        filename = source.split(" §")[0]
        assert filename in text  # cited in the comments as well
        if filename.endswith(".txt") and REFERENCE.is_dir():
            section = source.split("§", 1)[1].strip()
            assert section in (REFERENCE / filename).read_text(), f"{source}: no such section"
    assert preset.target.platform in {"rocm", "cpu"}
    assert preset.target.vllm_version


def test_cpu_demo_matches_the_embedded_default() -> None:
    assert DEMO_MODEL_ALIAS == DEMO_MODEL_PLACEHOLDER
    preset = load_preset(find_preset("cpu-demo"))  # resolves tunelab:demo (builds the model)
    assert preset.target.model == DEMO_MODEL_PLACEHOLDER
    assert preset.config.config_id == demo_config().config_id
    assert preset.config.serve_args() == demo_config().serve_args()


def test_contents_follow_the_reference_docs() -> None:
    """Spot checks of the values the cited sections prescribe."""
    get = lambda n: load_preset(find_preset(n), resolve=False).config  # noqa: E731
    # block-size 1 was needed for AITER MLA before 0.11.1 only (PR #27715) and costs host
    # time at long context (PR #27224): the 0.33 preset leaves it at the default.
    assert "block-size" not in get("mla-deepseek").engine
    assert get("mla-deepseek").engine["tensor-parallel-size"] == 8
    dp = get("deepseek-dp8-ep").engine
    assert dp["data-parallel-size"] == 8 and dp["enable-expert-parallel"] is True
    assert "tensor-parallel-size" not in dp
    assert get("dense-throughput").engine["cudagraph-mode"] == "FULL"
    assert get("dense-throughput").engine["max-num-batched-tokens"] >= 32768
    assert get("dense-low-latency").engine["max-num-batched-tokens"] <= 8192
    # vLLM >= 0.19 ignores the unified-attention env switch: the backend is named instead.
    assert get("gpt-oss").env == {"VLLM_ROCM_USE_AITER": "1"}
    assert get("gpt-oss").engine["attention-backend"] == "ROCM_AITER_UNIFIED_ATTN"
    for name in ("dense-throughput", "dense-low-latency", "moe-mixtral"):
        assert get(name).engine["attention-backend"] == "ROCM_AITER_FA", name
        assert get(name).env["VLLM_ROCM_USE_AITER"] == "1", name
    assert get("dense-throughput").engine["max-num-seqs"] >= 2048
    assert get("awq").env["VLLM_USE_TRITON_AWQ"] == "1"
    assert get("awq").engine["quantization"] == "awq"
    assert get("fp8-kv-cache").engine["kv-cache-dtype"] == "fp8"
    assert get("moe-mixtral").env["VLLM_ROCM_USE_AITER_MOE"] == "1"
    for name in EXPECTED - {"cpu-demo", "awq"}:
        assert get(name).env.get("VLLM_ROCM_USE_AITER") == "1", name


def test_find_by_path_and_unknown_name(tmp_path: Path) -> None:
    path = shipped_dir() / "awq.toml"
    assert find_preset(str(path)) == path
    with pytest.raises(PresetError) as info:
        find_preset("no-such-preset")
    assert "known: awq, cpu-demo" in str(info.value)
    with pytest.raises(PresetError, match="no preset file"):
        find_preset(str(tmp_path / "missing.toml"))


def test_user_presets_are_listed_after_shipped(tunelab_home: Path) -> None:
    user = tunelab_home / "data" / "presets"
    user.mkdir(parents=True)
    text = (shipped_dir() / "awq.toml").read_text()
    (user / "mine.toml").write_text(re.sub(r'name = "awq"', 'name = "mine"', text))
    (user / "broken.toml").write_text("[preset\n")
    entries = list_presets()
    assert [e.origin for e in entries][-2:] == ["user", "user"]
    by_name = {e.name: e for e in entries}
    assert by_name["mine"].preset is not None
    assert "not valid TOML" in by_name["broken"].error
    assert find_preset("mine") == user / "mine.toml"
