"""The catalogue API: parsing ``--set`` values and version/platform availability."""

from __future__ import annotations

import pytest

from tuner import knobs
from tuner.config import ConfigError
from tuner.knobs import AvailabilityStatus as S
from tuner.knobs.versions import in_range, parse_version

# -- coerce ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("VLLM_ROCM_USE_AITER", "1", True),
        ("VLLM_ROCM_USE_AITER", "0", False),
        ("VLLM_ROCM_USE_AITER", "True", True),
        ("enable-prefix-caching", "off", False),
        ("max-num-batched-tokens", " 8192 ", 8192),
        ("gpu-memory-utilization", "0.95", 0.95),
        ("cudagraph-mode", "full_decode_only", "FULL_DECODE_ONLY"),
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "INT4", "INT4"),
        (
            "speculative-config",
            '{"method": "eagle3", "num_speculative_tokens": 2}',
            {"method": "eagle3", "num_speculative_tokens": 2},
        ),
        ("--max-num-seqs", "64", 64),
        ("max_num_seqs", "64", 64),
        ("attention-backend", "ROCM_AITER_FA", "ROCM_AITER_FA"),
        ("quantization", "ptpc_fp8", "ptpc_fp8"),
    ],
)
def test_coerce_parses_by_type(key: str, text: str, expected: object) -> None:
    value = knobs.coerce(key, text)
    assert value == expected
    assert type(value) is type(expected)


def test_unknown_key_suggests_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"unknown knob 'max-num-seq'.*did you mean max-num-seqs"):
        knobs.coerce("max-num-seq", "4")
    with pytest.raises(ConfigError, match="VLLM_ROCM_USE_AITER_MOE"):
        knobs.coerce("VLLM_ROCM_USE_AITER_MOEE", "1")
    with pytest.raises(ConfigError, match=r"unknown knob 'zzz' \(`tunelab knobs`"):
        knobs.coerce("zzz", "1")


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("VLLM_ROCM_USE_AITER", "maybe", r"switch: write 1/0"),
        ("max-num-seqs", "many", r"whole number of at least 1"),
        ("max-num-seqs", "0", r"out of range.*at least 1"),
        ("gpu-memory-utilization", "1.5", r"from 0.01 to 1"),
        ("cudagraph-mode", "SOMETIMES", r"allowed values: NONE, PIECEWISE, FULL"),
        ("mm-encoder-tp-mode", "both", r"allowed values: weights, data"),
        ("speculative-config", "{method: eagle}", r"JSON value.*not valid JSON"),
    ],
)
def test_bad_values_say_what_is_allowed(key: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        knobs.coerce(key, text)


def test_introspected_values_replace_the_catalogue_list() -> None:
    assert (
        knobs.coerce("attention-backend", "NEW_BACKEND", allowed=["NEW_BACKEND"]) == "NEW_BACKEND"
    )
    with pytest.raises(ConfigError, match="allowed values: CPU_ATTN"):
        knobs.coerce("attention-backend", "ROCM_AITER_FA", allowed=["CPU_ATTN"])


def test_parse_assignments() -> None:
    values = knobs.parse_assignments(
        ["VLLM_ROCM_USE_AITER=1", "--max-num-batched-tokens=16384", "kv-cache-dtype=fp8"]
    )
    assert values == {
        "VLLM_ROCM_USE_AITER": True,
        "max-num-batched-tokens": 16384,
        "kv-cache-dtype": "fp8",
    }
    assert knobs.parse_assignments(["max_num_seqs=8", "max-num-seqs=8"]) == {"max-num-seqs": 8}


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["max-num-seqs"], r"has no '='"),
        (["=3"], r"empty key"),
        (["max-num-seqs=8", "max-num-seqs=16"], r"set twice"),
        (["VLLM_ROCM_USE_AITER=yes please"], r"switch"),
    ],
)
def test_parse_assignments_errors(items: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        knobs.parse_assignments(items)


# -- versions ------------------------------------------------------------------

V10, V12, V18, NEWEST = "0.10.0", "0.12.0", "0.18.0", "0.33.0"
A, R, N = S.AVAILABLE, S.REMOVED, S.NOT_YET

# Facts read from vLLM's source of each release (docs/knob-versions.md).
AVAILABILITY = {
    "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": (A, A, R, R),
    "VLLM_USE_TRITON_FLASH_ATTN": (A, R, R, R),
    "VLLM_ROCM_CUSTOM_PAGED_ATTN": (A, A, A, R),
    "VLLM_ALL2ALL_BACKEND": (A, A, R, R),
    "VLLM_ATTENTION_BACKEND": (A, A, R, R),
    "num-scheduler-steps": (A, R, R, R),
    "max-seq-len-to-capture": (A, R, R, R),
    "calculate-kv-scales": (A, A, A, R),
    "attention-backend": (N, N, A, A),
    "all2all-backend": (N, A, A, A),
    "cudagraph-mode": (N, A, A, A),
    "mm-encoder-tp-mode": (N, A, A, A),
    "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": (N, A, A, A),
    "VLLM_ROCM_USE_AITER_FP4BMM": (N, N, A, A),
    "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": (N, N, A, A),
    "VLLM_ROCM_USE_AITER": (A, A, A, A),
    "max-num-batched-tokens": (A, A, A, A),
}


@pytest.mark.parametrize(("key", "expected"), sorted(AVAILABILITY.items()))
def test_availability_by_version(key: str, expected: tuple[S, ...]) -> None:
    knob = knobs.get(key)
    assert knob is not None
    got = tuple(knobs.available(knob, v, "rocm").status for v in (V10, V12, V18, NEWEST))
    assert got == expected


VALUE_AVAILABILITY = {
    ("quantization", "ptpc_fp8"): (A, A, A, R),
    ("attention-backend", "ROCM_AITER_UNIFIED_ATTN"): (N, A, A, A),
    ("attention-backend", "ROCM_ATTN"): (N, A, A, A),
    ("attention-backend", "ROCM_FLASH"): (A, R, R, R),
    ("attention-backend", "CPU_ATTN"): (N, A, A, A),
    ("kv-cache-dtype", "fp8_e4m3"): (A, A, A, A),
    ("kv-cache-dtype", "float16"): (N, N, A, A),
    ("cudagraph-mode", "FULL_AND_PIECEWISE"): (N, A, A, A),
    ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "INT3"): (N, N, N, A),
}


@pytest.mark.parametrize(("pair", "expected"), sorted(VALUE_AVAILABILITY.items()))
def test_value_availability_by_version(pair: tuple[str, str], expected: tuple[S, ...]) -> None:
    knob = knobs.get(pair[0])
    assert knob is not None
    got = tuple(knobs.value_available(knob, pair[1], v).status for v in (V10, V12, V18, NEWEST))
    assert got == expected


def test_removed_verdict_names_the_replacement() -> None:
    knob = knobs.get("VLLM_V1_USE_PREFILL_DECODE_ATTENTION")
    assert knob is not None
    verdict = knobs.available(knob, "0.18.0", "rocm")
    assert verdict.status is S.REMOVED
    assert verdict.replacement == "attention-backend=ROCM_ATTN"
    assert "removed in vLLM 0.15.0" in verdict.reason and "ROCM_ATTN" in verdict.reason


def test_unified_attention_switch_notes_it_is_ignored_from_0_19() -> None:
    knob = knobs.get("VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION")
    assert knob is not None
    assert knobs.available(knob, "0.18.0", "rocm").note == ""
    verdict = knobs.available(knob, "0.19.0", "rocm")
    assert verdict.ok and "ROCM_AITER_UNIFIED_ATTN" in verdict.note


def test_fp4_asm_gemm_gap_releases() -> None:
    knob = knobs.get("VLLM_ROCM_USE_AITER_FP4_ASM_GEMM")
    assert knob is not None
    states = [
        knobs.available(knob, v, "rocm").status
        for v in ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.33.0")
    ]
    assert states == [A, R, R, A, R]


def test_platform_applicability() -> None:
    aiter = knobs.get("VLLM_ROCM_USE_AITER")
    mbt = knobs.get("max-num-batched-tokens")
    assert aiter is not None and mbt is not None
    verdict = knobs.available(aiter, "0.32.0", "cpu")
    assert verdict.status is S.NOT_APPLICABLE and "only has an effect on rocm" in verdict.reason
    assert knobs.available(aiter, "0.32.0", "rocm").ok
    assert knobs.available(mbt, "0.32.0", "cpu").ok
    # Unknown target: the catalogue cannot object.
    assert knobs.available(aiter, None, None).ok


def test_removal_wins_over_platform() -> None:
    knob = knobs.get("VLLM_USE_TRITON_FLASH_ATTN")
    assert knob is not None
    assert knobs.available(knob, "0.33.0", "cpu").status is S.REMOVED


def test_version_parsing_ignores_dev_and_local_parts() -> None:
    assert parse_version("0.12.0rc1.dev5+g1234") == (0, 12, 0)
    assert parse_version("0.32.0+cpu") == (0, 32, 0)
    assert parse_version("0.12") == (0, 12, 0)
    assert in_range("0.15.0", None, "0.15.0") == 1
    with pytest.raises(ValueError, match="not a vLLM version"):
        parse_version("latest")


def test_choices_for_follow_the_version() -> None:
    knob = knobs.get("attention-backend")
    assert knob is not None
    assert "ROCM_FLASH" in knobs.choices_for(knob, "0.10.0")
    assert "ROCM_FLASH" not in knobs.choices_for(knob, "0.12.0")
    assert "ROCM_AITER_FA" in knobs.choices_for(knob, "0.33.0")
    assert set(knobs.choices_for(knob, "0.12.0")) <= set(knobs.choices_for(knob))


def test_lenient_parsing_passes_unknown_flags_through() -> None:
    values = knobs.parse_assignments(
        ["trust-remote-code=true", "max-num-seqs=4", "VLLM_SOMETHING_NEW=2"], strict=False
    )
    assert values == {"trust-remote-code": True, "max-num-seqs": 4, "VLLM_SOMETHING_NEW": 2}
    with pytest.raises(ConfigError, match="unknown knob 'trust-remote-code'"):
        knobs.parse_assignments(["trust-remote-code=true"])
