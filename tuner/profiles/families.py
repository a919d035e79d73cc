"""Which part of an LLM step a profiled op or GPU kernel belongs to (issue 29).

A trace lists thousands of op and kernel names; "why is B faster" is answered
in a handful of families: attention, GEMM/linear, MoE, normalisation and
activations, communication, sampling, KV-cache writes, other ops, and the two
that are not ops at all: host-side work inside a step (Python, scheduling,
input preparation: ``host``) and time between steps (``gaps``). The pattern
table is per platform because the names are: vLLM's CPU ops (``_C::...``,
``aten::...``), ROCm kernels (AITER ``aiter::``/``_ZN5aiter``, CK and ck_tile,
hipBLASLt/Tensile ``Cijk_``, Triton, RCCL and AITER's custom all-reduce), CUDA
kernels (cuBLAS ``nvjet``/``sm90_xmma``/``ampere_*gemm``, CUTLASS,
FlashAttention, FlashInfer, NCCL). The tables were checked against real names
(tests/data/kernel_names: public ROCm and CUDA traces; CPU traces made here).
Order matters: the first pattern that matches decides (a MoE GEMM is MoE, not
GEMM; a fused RoPE + KV-cache write is a KV-cache op).
"""

from __future__ import annotations

import re
from typing import Literal

Platform = Literal["cpu", "rocm", "cuda"]

ATTENTION = "attention"
GEMM = "gemm"
MOE = "moe"
NORM_ACT = "norm_act"
COMMUNICATION = "communication"
SAMPLING = "sampling"
KV_CACHE = "kv_cache"
OTHER = "other"
HOST = "host"
GAPS = "gaps"
# Report order; every family a profile can hold. ``other`` is named ops of no family
# above: named (it is measured), but not an explanation of anything.
FAMILIES = (ATTENTION, GEMM, MOE, NORM_ACT, COMMUNICATION, SAMPLING, KV_CACHE, OTHER, HOST, GAPS)
LABELS = {
    ATTENTION: "attention",
    GEMM: "GEMM / linear",
    MOE: "MoE",
    NORM_ACT: "norm & activations",
    COMMUNICATION: "communication",
    SAMPLING: "sampling",
    KV_CACHE: "KV-cache ops",
    OTHER: "other ops",
    HOST: "host-side (in step)",
    GAPS: "gaps between steps",
}

_I = re.IGNORECASE
# Patterns every platform shares (vLLM's own op and kernel names, Triton, torch).
_COMMON: list[tuple[str, str]] = [
    # Bookkeeping that names what it serves: metadata, embedding lookup, fills and copies.
    (OTHER, r"metadata|(?<!rotary_)embedding|FillFunctor|direct_copy|fill_kernel"),
    (NORM_ACT, r"rms_?norm|layer_?norm"),
    (KV_CACHE, r"reshape_and_cache|kv_cache_update|cache_kernel|concat_and_cache|copy_blocks"),
    (MOE, r"moe|fmoe|topkGating|expert|matmul_ogs"),
    (COMMUNICATION, r"nccl|rccl|all_?reduce|allgather|all_gather|reduce_scatter|cross_device"),
    (SAMPLING, r"sampl|gumbel|argmax|top_?k_?top_?p|softmax_sampling|multinomial|penalt"),
    (ATTENTION, r"attention|attn|flash|fmha|mla|rotary|rope|gdn|conv1d|mqa|chunk_(local|gated)"),
    (NORM_ACT, r"norm|silu|gelu|act_and_mul|swiglu|relu|rsqrt|elementwise|triton_(poi|red)_"),
    (GEMM, r"gemm|gemv|matmul|linear|aten::(mm|addmm|bmm|baddbmm)\b|cublas|nvjet|xmma|Cijk_"),
]
# Before the common table: names whose library says more than their words.
_FIRST: dict[Platform, list[tuple[str, str]]] = {
    "cpu": [],
    "rocm": [
        # AITER's and triton's "all_reduce" inside a fused norm is not a collective:
        # Inductor names a fused kernel after every op it holds, the norm's last.
        (NORM_ACT, r"^triton_(poi|red|per)_fused_.*(mean|rsqrt|pow).*"),
        (ATTENTION, r"FmhaFwd|FmhaBwd"),
    ],
    "cuda": [
        (NORM_ACT, r"^triton_(poi|red|per)_fused_.*(mean|rsqrt|pow).*"),
        (ATTENTION, r"flash::|FlashAttn|flash_fwd"),
    ],
}
_TABLES: dict[Platform, list[tuple[str, re.Pattern[str]]]] = {
    platform: [(family, re.compile(rx, _I)) for family, rx in [*first, *_COMMON]]
    for platform, first in _FIRST.items()
}


def family_of(name: str, platform: Platform) -> str:
    """The family of an op or kernel ``name`` on ``platform``; ``other`` when none matches."""
    for family, pattern in _TABLES[platform]:
        if pattern.search(name):
            return family
    return OTHER
