"""AITER's untuned-shape lines read from real engine logs (issue 29).

The logs under tests/data/aiter_logs are verbatim excerpts of public reports
(SOURCES.md names each one): vLLM workers with ``(Worker_TP4_EP4 pid=892)``
prefixes, SGLang's untagged copies, a hand-wrapped line and tuned-config hits
that must not count. The families no public report shows verbatim (a8w8 with
``q_dtype_w``, a4w4, batched, the newer fused-MoE key with ``'gfx942'``) are
tested with lines rendered from AITER's own format strings, named as such.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.engine.aiter_shapes import (
    FAMILIES,
    UNKNOWN,
    ArmsShapes,
    UntunedShapes,
    family_of_table,
    merge,
    parse_line,
    scan,
)

LOGS = Path(__file__).parent / "data" / "aiter_logs"


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def _by_key(shapes: UntunedShapes) -> dict[tuple[str, ...], object]:
    return {(s.family, *(v for _, v in s.values)): s for s in shapes.shapes}


def test_vllm_tp8_log_counts_each_shape_once_across_ranks() -> None:
    found = scan(_read("vllm-43605.log"))
    # 3 a8w8_blockscale lines (TP4, TP0, TP5), 5 bf16 lines, 1 fused-MoE line; 11 noise lines.
    assert found.lines == 9
    shapes = _by_key(found)
    assert set(shapes) == {
        ("a8w8_blockscale", "8192", "1024", "3072"),
        (
            "bf16",
            "8192",
            "256",
            "3072",
            "False",
            "torch.float32",
            "torch.float32",
            "False",
            "False",
        ),
        (
            "bf16",
            "1024",
            "25008",
            "3072",
            "False",
            "torch.bfloat16",
            "torch.bfloat16",
            "False",
            "False",
        ),
        (
            "fmoe",
            *("8192", "3072", "1536", "32", "8", "ActivationType.Silu", "torch.bfloat16"),
            *("torch.float8_e4m3fn", "torch.float8_e4m3fn", "QuantType.per_1x128", "1", "0"),
        ),
    }
    block = shapes[("a8w8_blockscale", "8192", "1024", "3072")]
    assert (block.ranks, block.lines) == (3, 3)  # type: ignore[attr-defined]
    gate = next(s for s in found.shapes if s.family == "bf16" and ("N", "256") in s.values)
    assert (gate.ranks, gate.lines) == (4, 4)
    assert gate.table == "/tmp/aiter_configs/bf16_tuned_gemm.csv"
    assert found.summary() == (
        "3 GEMM shapes and 1 fused-MoE shape ran on AITER's default kernels "
        "(bf16 2, a8w8_blockscale 1, fmoe 1)"
    )


def test_tp_only_prefixes_and_a_shape_on_two_ranks() -> None:
    found = scan(_read("vllm-39485.log"))
    assert found.lines == 8 and len(found.shapes) == 7
    assert {s.family for s in found.shapes} == {"a8w8_blockscale"}
    twice = next(s for s in found.shapes if dict(s.values) == {"M": "72", "N": "512", "K": "7168"})
    assert (twice.ranks, twice.lines) == (2, 2)


def test_sglang_copies_and_trailing_spaces() -> None:
    found = scan(_read("aiter-2059.log"))
    # 6 fused-MoE lines (3 [aiter]-tagged, 3 SGLang copies) of 2 shapes; the rest is noise.
    assert found.lines == 6
    tokens = sorted(dict(s.values)["token"] for s in found.shapes)
    assert tokens == ["1024", "16384"] and {s.family for s in found.shapes} == {"fmoe"}
    big = next(s for s in found.shapes if dict(s.values)["token"] == "1024")
    assert big.lines == 4 and big.ranks == 3  # "" (untagged [aiter]), TP6, TP7
    assert dict(big.values)["q_type"] == "QuantType.No"


def test_a_hand_wrapped_key_and_tuned_hits_are_never_counted() -> None:
    # aiter#5049's reporter wrapped one line over three: no half-read shape.
    assert not scan(_read("aiter-5049.log"))
    # Tuned-config hits ("is tuned on cu_num = 304 in CKGEMM") are not fallbacks.
    assert not scan(_read("sglang-10195.log"))


# Lines rendered from AITER's f-strings (ROCm/aiter e4048607, 2026-08-22): no public
# report shows these families verbatim. File:line of each format string beside it.
RENDERED = {
    # aiter/ops/gemm_op_a8w8.py:551 (get_GEMM_config_with_quant_type)
    "a8w8_bpreshuffle": "(Worker_TP0 pid=7) [aiter] shape is M:64, N:1536, K:5120, "
    "q_dtype_w:torch.float8_e4m3fnuz, not found tuned config in "
    "/tmp/aiter_configs/a8w8_bpreshuffle_tuned_gemm.csv, will use default config!",
    # aiter/ops/gemm_op_a4w4.py:76
    "a4w4_blockscale": "[aiter] shape is M:1, N:16384, K:16384, not found tuned config in "
    "/tmp/aiter_configs/a4w4_blockscale_tuned_gemm.csv, will use default config!",
    # aiter/ops/batched_gemm_op_a8w8.py:119 and batched_gemm_op_bf16.py:102
    "a8w8_batched": "[aiter] shape is B:16, M:32, N:1280, K:8192, not found tuned config in "
    "CKGEMM, will use default config!",
    "bf16_batched": "[aiter] shape is B:16, M:1, N:1280, K:8192 dtype is bf16, not found tuned "
    "config in CKGEMM, will use default config!",
    # gemm_op_a4w4.py before 80f0e28649 (2026-04): "in CKGEMM or asmGEMM"
    "a4w4_old": "[aiter] shape is M:1, N:106496, K:16384, not found tuned config in CKGEMM or "
    "asmGEMM, will use default config!",
    # aiter/fused_moe.py:2461 with the keys tuple of :2231 (gfx first, the enum's repr)
    "fmoe_gfx": "\x1b[1;36m(Worker_TP1 pid=9)\x1b[0;0m [aiter] [fused_moe] using 2stage default "
    "for ('gfx942', 304, 2048, 7168, 256, 256, 8, <ActivationType.Silu: 0>, 'torch.bfloat16', "
    "'torch.float8_e4m3fnuz', 'torch.float8_e4m3fnuz', 'QuantType.per_1x128', True, False)",
}


@pytest.mark.parametrize(
    ("name", "family", "values"),
    [
        ("a8w8_bpreshuffle", "a8w8_bpreshuffle", ("64", "1536", "5120", "torch.float8_e4m3fnuz")),
        ("a4w4_blockscale", "a4w4_blockscale", ("1", "16384", "16384")),
        ("a8w8_batched", "a8w8_batched", ("16", "32", "1280", "8192")),
        ("bf16_batched", "bf16_batched", ("16", "1", "1280", "8192")),
        ("a4w4_old", "a4w4_blockscale", ("1", "106496", "16384")),
        (
            "fmoe_gfx",
            "fmoe",
            (
                *("2048", "7168", "256", "256", "8", "ActivationType.Silu", "torch.bfloat16"),
                *(
                    "torch.float8_e4m3fnuz",
                    "torch.float8_e4m3fnuz",
                    "QuantType.per_1x128",
                    "1",
                    "0",
                ),
            ),
        ),
    ],
)
def test_every_family_form_in_its_untuned_columns(
    name: str, family: str, values: tuple[str, ...]
) -> None:
    parsed = parse_line(RENDERED[name])
    assert parsed is not None
    who, shape = parsed
    assert shape.family == family
    assert tuple(k for k, _ in shape.values) == FAMILIES[family].columns
    assert tuple(v for _, v in shape.values) == values
    if name in ("a8w8_bpreshuffle", "fmoe_gfx"):
        assert who in ("Worker_TP0", "Worker_TP1")


def test_the_table_names_its_family() -> None:
    assert family_of_table("/tmp/aiter_configs/a8w8_blockscale_bpreshuffle_tuned_gemm.csv") == (
        "a8w8_blockscale_bpreshuffle"
    )  # the longest stem, not a8w8_blockscale
    assert family_of_table("/x/configs/model_configs/dsv4_bf16_tuned_gemm.csv") == "bf16"
    assert family_of_table("/tmp/a8w8_tuned_gemm.1234.csv") == "a8w8"
    # A table the config chose is that variable's family, whatever its name.
    env = {"AITER_CONFIG_GEMM_A8W8_BLOCKSCALE": "/opt/mine.csv:/opt/more.csv"}
    assert family_of_table("/opt/more.csv", env) == "a8w8_blockscale"
    assert family_of_table("/opt/more.csv") == UNKNOWN
    # Older AITER's CK GEMM named no table: the shape is kept, its family unknown.
    old = parse_line(
        "[aiter] shape is M:32, N:1280, K:8192, not found tuned config in CKGEMM, will use default config!"
    )
    assert (
        old is not None
        and old[1].family == UNKNOWN
        and dict(old[1].values) == {"M": "32", "N": "1280", "K": "8192"}
    )


def test_arms_notes_say_whether_the_arms_differ() -> None:
    a = scan(_read("vllm-43605.log"))
    b = UntunedShapes(tuple(s for s in a.shapes if s.family != "bf16"), 4)
    assert ArmsShapes().note() is None
    same = ArmsShapes(a, merge([a, a])).note()
    assert same is not None and same.startswith("AITER: both arms: 3 GEMM shapes")
    differ = ArmsShapes(a, b).note()
    assert differ is not None
    assert "A 4, B 2 (2 only in A, 0 only in B)" in differ
    assert "--aiter-untuned" in differ


def test_stored_form_round_trips() -> None:
    found = scan(_read("vllm-43605.log"))
    again = UntunedShapes.from_dict(found.to_dict())
    assert again == found
    assert UntunedShapes.from_dict(None) == UntunedShapes()
