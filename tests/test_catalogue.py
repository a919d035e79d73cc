"""Integrity of the knob catalogue as data: every entry complete, cited, consistent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner import knobs
from tuner.config import ENGINE_KEY_RE, ENV_KEY_RE
from tuner.knobs import KNOBS, KnobKind, ValueType
from tuner.knobs.value_sets import VALUE_SETS, VERIFIED_VERSIONS
from tuner.knobs.versions import parse_version

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"

# Everything issue 3 says the catalogue must cover.
ISSUE_KEYS = [
    "VLLM_ROCM_USE_AITER",
    "VLLM_ROCM_USE_AITER_LINEAR",
    "VLLM_ROCM_USE_AITER_MOE",
    "VLLM_ROCM_USE_AITER_RMSNORM",
    "VLLM_ROCM_USE_AITER_MLA",
    "VLLM_ROCM_USE_AITER_MHA",
    "VLLM_ROCM_USE_AITER_FP8BMM",
    "VLLM_ROCM_USE_AITER_FP4BMM",
    "VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS",
    "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION",
    "VLLM_ROCM_USE_SKINNY_GEMM",
    "VLLM_ROCM_FP8_PADDING",
    "VLLM_ROCM_MOE_PADDING",
    "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT",
    "VLLM_ROCM_CUSTOM_PAGED_ATTN",
    "VLLM_V1_USE_PREFILL_DECODE_ATTENTION",
    "VLLM_USE_TRITON_FLASH_ATTN",
    "VLLM_USE_TRITON_AWQ",
    "AITER_ONLINE_TUNE",
    "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION",
    "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16",
    "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB",
    "HIP_FORCE_DEV_KERNARG",
    "TORCH_BLAS_PREFER_HIPBLASLT",
    "SAFETENSORS_FAST_GPU",
    "NCCL_MIN_NCHANNELS",
    "VLLM_ALL2ALL_BACKEND",
    "all2all-backend",
    "attention-backend",
    "max-num-batched-tokens",
    "max-num-seqs",
    "cudagraph-mode",
    "quantization",
    "kv-cache-dtype",
    "calculate-kv-scales",
    "dtype",
    "block-size",
    "gpu-memory-utilization",
    "max-model-len",
    "enable-chunked-prefill",
    "enable-prefix-caching",
    "async-scheduling",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "data-parallel-size",
    "enable-expert-parallel",
    "enforce-eager",
    "max-seq-len-to-capture",
    "num-scheduler-steps",
    "mm-encoder-tp-mode",
    "speculative-config",
]


def _ids(knob: knobs.Knob) -> str:
    return knob.key


@pytest.mark.parametrize("key", ISSUE_KEYS)
def test_issue_keys_are_covered(key: str) -> None:
    assert knobs.get(key) is not None, f"{key} is missing from the catalogue"


def test_keys_are_unique_and_well_formed() -> None:
    keys = [k.key for k in KNOBS]
    assert len(keys) == len(set(keys))
    for knob in KNOBS:
        pattern = ENV_KEY_RE if knob.kind is KnobKind.ENV else ENGINE_KEY_RE
        assert pattern.match(knob.key), knob.key


@pytest.mark.parametrize("knob", KNOBS, ids=_ids)
def test_every_knob_has_help_group_and_source(knob: knobs.Knob) -> None:
    assert knob.help.strip() and "\n" not in knob.help, "help must be one line"
    assert len(knob.help) <= 160, "help must stay a one-liner"
    assert knob.group in knobs.GROUP_ORDER
    assert " §" in knob.source, "source must be 'file name §section'"


@pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"reference docs not at {REFERENCE}")
@pytest.mark.parametrize("knob", KNOBS, ids=_ids)
def test_every_source_names_an_existing_reference_section(knob: knobs.Knob) -> None:
    name, section = knob.source.split(" §", 1)
    path = REFERENCE / name
    assert path.is_file(), f"{knob.key}: {name} is not in {REFERENCE}"
    text = path.read_text(encoding="utf-8")
    # Sections render as "Title" or "Configure –max-num-seqs#" (web copy); compare loosely.
    assert _loose(section) in _loose(text), f"{knob.key}: no section {section!r} in {name}"


def _loose(text: str) -> str:
    return " ".join(text.replace("–", "--").replace("#", " ").split()).lower()


@pytest.mark.parametrize("knob", KNOBS, ids=_ids)
def test_versions_parse_and_are_ordered(knob: knobs.Knob) -> None:
    since = parse_version(knob.since) if knob.since else None
    until = parse_version(knob.until) if knob.until else None
    if since and until:
        assert since < until


@pytest.mark.parametrize("knob", KNOBS, ids=_ids)
def test_choices_and_defaults_fit_the_type(knob: knobs.Knob) -> None:
    if knob.type is ValueType.CHOICE:
        assert knob.choices or knob.extra.get("value_set"), "a CHOICE knob needs values"
        if knob.default is not None:
            assert knob.default in knobs.choices_for(knob)
    if knob.type is ValueType.BOOL and knob.default is not None:
        assert isinstance(knob.default, bool)
    if knob.type in (ValueType.INT, ValueType.FLOAT) and knob.default is not None:
        low = knob.minimum if knob.minimum is not None else float("-inf")
        high = knob.maximum if knob.maximum is not None else float("inf")
        assert low <= knob.default <= high


REMOVED_WITH_REPLACEMENT = {
    "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "attention-backend=ROCM_ATTN",
    "VLLM_ATTENTION_BACKEND": "attention-backend",
    "VLLM_ALL2ALL_BACKEND": "all2all-backend",
    "num-scheduler-steps": "async-scheduling",
    "VLLM_USE_TRITON_FLASH_ATTN": "VLLM_ROCM_USE_AITER=1",
}


@pytest.mark.parametrize(("key", "replacement"), sorted(REMOVED_WITH_REPLACEMENT.items()))
def test_removed_knobs_name_their_replacement(key: str, replacement: str) -> None:
    knob = knobs.get(key)
    assert knob is not None and knob.until is not None
    assert knob.replacement == replacement


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.replacement], ids=_ids)
def test_replacements_exist_where_the_old_knob_is_gone(knob: knobs.Knob) -> None:
    """A replacement is a catalogue knob that the removing release already has."""
    assert knob.until is not None, "only removed knobs carry a replacement"
    target_key = knob.replacement.split("=")[0].split(" ")[0]
    target = knobs.get(target_key)
    assert target is not None, f"{knob.key}: replacement {target_key} is not in the catalogue"
    assert knobs.available(target, knob.until, None).ok
    value = knob.replacement.split("=", 1)[1] if "=" in knob.replacement else None
    if value is not None and target.type is ValueType.CHOICE:
        assert value in knobs.choices_for(target, knob.until)


def test_value_sets_are_consistent() -> None:
    for name, items in VALUE_SETS.items():
        names = [v.name for v in items]
        assert len(names) == len(set(names)), f"duplicate value in {name}"
        for item in items:
            if item.since and item.until:
                assert parse_version(item.since) < parse_version(item.until), item
            for bound in (item.since, item.until):
                assert bound is None or bound in VERIFIED_VERSIONS, (name, item)


def test_groups_follow_group_order_and_cover_every_knob() -> None:
    groups = knobs.groups()
    assert list(groups) == [g for g in knobs.GROUP_ORDER if g in groups]
    assert sum(len(v) for v in groups.values()) == len(KNOBS)
    assert all(g in knobs.GROUP_TITLES for g in groups)


def test_aiter_sub_flags_point_at_the_master_switch() -> None:
    subs = [k for k in KNOBS if k.key.startswith("VLLM_ROCM_USE_AITER_")]
    assert len(subs) >= 10
    assert all(k.extra.get("parent") == "VLLM_ROCM_USE_AITER" for k in subs)
