"""What vLLM accepts as values, per version: backends, cudagraph modes, quantization, KV dtypes.

These lists change with nearly every vLLM release, so each value carries the
range of versions that have it. The data was read from vLLM's own source in
every release from 0.10.0 to 0.33.0 (see ``docs/knob-versions.md``):
``AttentionBackendEnum`` (``_Backend`` before 0.11.1), ``CUDAGraphMode``,
``QuantizationMethods`` and ``CacheDType``. The installed vLLM's
introspection (``tuner.introspect``) is still the stronger source; this table
is the fallback and what planning for another machine uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.knobs.versions import in_range

# Every vLLM release whose source was read for this table (docs/knob-versions.md).
VERIFIED_VERSIONS: tuple[str, ...] = (
    "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0",
    "0.14.0", "0.15.0", "0.16.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0", "0.21.0",
    "0.22.0", "0.23.0", "0.24.0", "0.25.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0",
    "0.30.0", "0.31.0", "0.32.0", "0.33.0",
)  # fmt: skip


@dataclass(frozen=True)
class VersionedValue:
    """One accepted value and the vLLM versions that accept it.

    Attributes:
        name: The value as vLLM spells it.
        since: First version that has it (None: 0.10.0 or older).
        until: First version that no longer has it (None: still there in the newest).
    """

    name: str
    since: str | None = None
    until: str | None = None

    def present_in(self, version: str | None) -> bool:
        """True if ``version`` has this value (True for an unknown version)."""
        return version is None or in_range(version, self.since, self.until) == 0


# `--attention-backend` (and before 0.15.0 `VLLM_ATTENTION_BACKEND`) values.
ATTENTION_BACKENDS: tuple[VersionedValue, ...] = (
    VersionedValue("FLASH_ATTN"),
    VersionedValue("FLASH_ATTN_VLLM_V1", None, "0.11.0"),
    VersionedValue("TRITON_ATTN_VLLM_V1", None, "0.11.0"),
    VersionedValue("XFORMERS", None, "0.12.0"),
    VersionedValue("ROCM_FLASH", None, "0.11.1"),
    VersionedValue("ROCM_AITER_MLA"),
    VersionedValue("ROCM_AITER_MLA_VLLM_V1", None, "0.11.0"),
    VersionedValue("TORCH_SDPA"),
    VersionedValue("FLASHINFER"),
    VersionedValue("FLASHINFER_VLLM_V1", None, "0.11.0"),
    VersionedValue("TRITON_MLA"),
    VersionedValue("TRITON_MLA_VLLM_V1", None, "0.11.0"),
    VersionedValue("FLASHMLA_VLLM_V1", None, "0.11.0"),
    VersionedValue("FLASHMLA"),
    VersionedValue("CUTLASS_MLA_VLLM_V1", None, "0.10.1"),
    VersionedValue("PALLAS", None, "0.14.0"),
    VersionedValue("PALLAS_VLLM_V1", None, "0.11.0"),
    VersionedValue("IPEX", None, "0.16.0"),
    VersionedValue("DUAL_CHUNK_FLASH_ATTN", None, "0.11.1"),
    VersionedValue("DIFFERENTIAL_FLASH_ATTN", None, "0.11.1"),
    VersionedValue("NO_ATTENTION"),
    VersionedValue("FLEX_ATTENTION"),
    VersionedValue("ROCM_AITER_FA", "0.10.1", None),
    VersionedValue("CUTLASS_MLA", "0.10.1", None),
    VersionedValue("TREE_ATTN", "0.10.1", "0.21.0"),
    VersionedValue("XFORMERS_VLLM_V1", "0.10.1", "0.11.0"),
    VersionedValue("TORCH_SDPA_VLLM_V1", "0.10.2", "0.11.0"),
    VersionedValue("FLASHINFER_MLA", "0.10.2", None),
    VersionedValue("FLASH_ATTN_MLA", "0.10.2", None),
    VersionedValue("TRITON_ATTN", "0.11.0", None),
    VersionedValue("ROCM_ATTN", "0.11.0", None),
    VersionedValue("FLASHMLA_SPARSE", "0.11.1", None),
    VersionedValue("ROCM_AITER_UNIFIED_ATTN", "0.11.1", None),
    VersionedValue("CPU_ATTN", "0.11.1", None),
    VersionedValue("CUSTOM", "0.11.1", None),
    VersionedValue("ROCM_AITER_TRITON_MLA", "0.12.0", None),
    VersionedValue("ROCM_AITER_MLA_SPARSE", "0.12.0", None),
    VersionedValue("FLASH_ATTN_DIFFKV", "0.14.0", None),
    VersionedValue("FLASHINFER_MLA_SPARSE", "0.17.0", None),
    VersionedValue("XPU_MLA_SPARSE", "0.18.0", None),
    VersionedValue("TURBOQUANT", "0.20.0", None),
    VersionedValue("TOKENSPEED_MLA", "0.21.0", None),
    VersionedValue("FLASHMLA_SPARSE_DSV4", "0.23.0", None),
    VersionedValue("FLASHINFER_MLA_SPARSE_DSV4", "0.23.0", None),
    VersionedValue("ROCM_FLASHMLA_SPARSE_DSV4", "0.23.0", None),
    VersionedValue("TRITON_ATTN_DIFFKV", "0.24.0", None),
    VersionedValue("FLASHINFER_MLA_SPARSE_SM120", "0.24.0", None),
    VersionedValue("MINIMAX_M3_SPARSE", "0.24.0", None),
    VersionedValue("FLASH_ATTN_MLA_SPARSE", "0.25.0", None),
    VersionedValue("HPC_ATTN", "0.25.0", None),
    VersionedValue("CUTLASS_MSA", "0.27.0", None),
    VersionedValue("TRITON_MSA", "0.27.0", None),
    VersionedValue("CPU_MLA", "0.28.0", None),
    VersionedValue("AMX_MLA", "0.29.0", None),
    VersionedValue("TRITON_FLASH_ATTN", "0.30.0", None),
    VersionedValue("TRITON_FLASHINFER", "0.30.0", None),
    VersionedValue("FLASHINFER_MLA_SPARSE_SM90", "0.30.0", None),
    VersionedValue("FLASHMLA_SPARSE_DSV41", "0.30.0", None),
    VersionedValue("FLASHINFER_MLA_SPARSE_DSV41", "0.30.0", None),
    VersionedValue("B12X", "0.30.0", None),
    VersionedValue("FLASHMLA_MEGA_ATTN_DSV41", "0.31.0", None),
    VersionedValue("ROCM_SEGMENTED_ATTN", "0.32.0", None),
    VersionedValue("ULTRAQUANT", "0.32.0", None),
    VersionedValue("ROCM_FLASHMLA_SPARSE_DSV41", "0.33.0", None),
    VersionedValue("FLASH_ATTN_MLA_SPARSE_FA4", "0.33.0", None),
    VersionedValue("STEP5_DSA", "0.33.0", None),
    VersionedValue("ROCM_OCTAVE", "0.33.0", None),
)

# `--compilation-config {"cudagraph_mode": ...}`; 0.10.0 had no CUDAGraphMode yet.
CUDAGRAPH_MODES: tuple[VersionedValue, ...] = (
    VersionedValue("NONE", "0.10.1", None),
    VersionedValue("PIECEWISE", "0.10.1", None),
    VersionedValue("FULL", "0.10.1", None),
    VersionedValue("FULL_DECODE_ONLY", "0.10.1", None),
    VersionedValue("FULL_AND_PIECEWISE", "0.10.1", None),
)

# `--quantization` values (QuantizationMethods).
QUANTIZATION_METHODS: tuple[VersionedValue, ...] = (
    VersionedValue("aqlm", None, "0.10.1"),
    VersionedValue("awq"),
    VersionedValue("deepspeedfp", None, "0.15.0"),
    VersionedValue("tpu_int8", None, "0.14.0"),
    VersionedValue("fp8"),
    VersionedValue("ptpc_fp8", None, "0.19.0"),
    VersionedValue("fbgemm_fp8"),
    VersionedValue("modelopt"),
    VersionedValue("modelopt_fp4"),
    VersionedValue("marlin", None, "0.10.2"),
    VersionedValue("bitblas", None, "0.16.0"),
    VersionedValue("gguf", None, "0.24.0"),
    VersionedValue("gptq_marlin_24", None, "0.16.0"),
    VersionedValue("gptq_marlin"),
    VersionedValue("gptq_bitblas", None, "0.16.0"),
    VersionedValue("awq_marlin"),
    VersionedValue("gptq"),
    VersionedValue("compressed-tensors"),
    VersionedValue("bitsandbytes", None, "0.28.0"),
    VersionedValue("qqq", None, "0.10.2"),
    VersionedValue("hqq", None, "0.15.0"),
    VersionedValue("experts_int8"),
    VersionedValue("neuron_quant", None, "0.10.2"),
    VersionedValue("ipex", None, "0.16.0"),
    VersionedValue("quark"),
    VersionedValue("moe_wna16"),
    VersionedValue("torchao"),
    VersionedValue("auto-round", None, "0.15.0"),
    VersionedValue("rtn", None, "0.15.0"),
    VersionedValue("inc"),
    VersionedValue("mxfp4", "0.10.1", None),
    VersionedValue("petit_nvfp4", "0.10.2", "0.20.0"),
    VersionedValue("fp_quant", "0.11.1", None),
    VersionedValue("cpu_gptq", "0.12.0", "0.14.0"),
    VersionedValue("cpu_awq", "0.12.0", "0.23.0"),
    VersionedValue("modelopt_mxfp8", "0.16.0", None),
    VersionedValue("modelopt_mixed", "0.17.0", None),
    VersionedValue("mxfp8", "0.19.0", None),
    VersionedValue("humming", "0.20.0", None),
    VersionedValue("gpt_oss_mxfp4", "0.20.0", None),
    VersionedValue("deepseek_v4_fp8", "0.20.0", None),
    VersionedValue("online", "0.20.0", None),
    VersionedValue("fp8_per_tensor", "0.20.0", None),
    VersionedValue("fp8_per_block", "0.20.0", None),
    VersionedValue("int8_per_channel_weight_only", "0.20.0", None),
    VersionedValue("auto_gptq", "0.22.0", None),
    VersionedValue("auto_awq", "0.24.0", None),
    VersionedValue("fp8_per_channel", "0.24.0", None),
    VersionedValue("nvfp4_per_token", "0.26.0", None),
)

# `--kv-cache-dtype` values (CacheDType).
KV_CACHE_DTYPES: tuple[VersionedValue, ...] = (
    VersionedValue("auto"),
    VersionedValue("fp8"),
    VersionedValue("fp8_e4m3"),
    VersionedValue("fp8_e5m2"),
    VersionedValue("fp8_inc"),
    VersionedValue("bfloat16", "0.11.0", None),
    VersionedValue("fp8_ds_mla", "0.11.1", None),
    VersionedValue("float16", "0.18.0", None),
    VersionedValue("turboquant_k8v4", "0.20.0", None),
    VersionedValue("turboquant_4bit_nc", "0.20.0", None),
    VersionedValue("turboquant_k3v4_nc", "0.20.0", None),
    VersionedValue("turboquant_3bit_nc", "0.20.0", None),
    VersionedValue("int8_per_token_head", "0.20.0", None),
    VersionedValue("fp8_per_token_head", "0.20.0", None),
    VersionedValue("nvfp4", "0.20.0", None),
    VersionedValue("int4_per_token_head", "0.25.0", None),
    VersionedValue("nvfp4_4over6", "0.28.0", None),
    VersionedValue("nvfp4_ds_mla", "0.30.0", None),
    VersionedValue("ultraquant_4bit", "0.32.0", None),
    VersionedValue("octave_k3v4", "0.33.0", None),
    VersionedValue("octave_k3v3", "0.33.0", None),
    VersionedValue("octave_k3v3_compact", "0.33.0", None),
)

# --all2all-backend (vllm/config/parallel.py All2AllBackend; 0.32.0 lines 44-59).
# The argument itself exists from 0.11.1 (the catalogue's since). "mori" was
# split into mori_high_throughput / mori_low_latency and is gone in 0.32.0.
ALL2ALL_BACKENDS: tuple[VersionedValue, ...] = (
    VersionedValue("naive"),
    VersionedValue("pplx"),
    VersionedValue("deepep_high_throughput"),
    VersionedValue("deepep_low_latency"),
    VersionedValue("deepep_v2"),
    VersionedValue("mori", None, "0.32.0"),
    VersionedValue("mori_high_throughput"),
    VersionedValue("mori_low_latency"),
    VersionedValue("moonep"),
    VersionedValue("nixl_ep"),
    VersionedValue("allgather_reducescatter"),
    VersionedValue("flashinfer_all2allv"),
    VersionedValue("flashinfer_nvlink_two_sided"),
    VersionedValue("flashinfer_nvlink_one_sided"),
    VersionedValue("passthrough"),
)

# Which platforms' kernels implement an all2all backend (0.32.0 docstring of
# ParallelConfig.all2all_backend, config/parallel.py lines 219-233): DeepEP,
# pplx, MoonEP (NVLink) and FlashInfer are CUDA libraries; MoRI is AMD's.
ALL2ALL_PLATFORMS: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        (
            "pplx",
            "deepep_high_throughput",
            "deepep_low_latency",
            "deepep_v2",
            "moonep",
            "flashinfer_all2allv",
            "flashinfer_nvlink_two_sided",
            "flashinfer_nvlink_one_sided",
        ),
        frozenset({"cuda"}),
    ),
    **dict.fromkeys(("mori", "mori_high_throughput", "mori_low_latency"), frozenset({"rocm"})),
    **dict.fromkeys(("naive", "allgather_reducescatter"), frozenset({"cuda", "rocm"})),
}

# What a removed value became, where vLLM kept the behaviour under another name:
# on-the-fly per-channel FP8 (PTPC) is the fp8_per_channel online shorthand in
# 0.32 (vllm/config/quantization.py _ONLINE_SHORTHANDS line 203).
REPLACEMENTS: dict[str, dict[str, str]] = {
    "quantization_methods": {"ptpc_fp8": "fp8_per_channel"},
}

VALUE_SETS: dict[str, tuple[VersionedValue, ...]] = {
    "all2all_backends": ALL2ALL_BACKENDS,
    "attention_backends": ATTENTION_BACKENDS,
    "cudagraph_modes": CUDAGRAPH_MODES,
    "quantization_methods": QUANTIZATION_METHODS,
    "kv_cache_dtypes": KV_CACHE_DTYPES,
}

# Which platform's backend selector names a backend: read from
# vllm/platforms/{rocm,cuda,cpu}.py of 0.10.0, 0.18.0 and 0.32.0. A backend
# absent here is not known to this table (the rules stay silent about it).
_ROCM_BACKENDS = frozenset(
    {
        "ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_MLA", "ROCM_AITER_MLA_SPARSE",
        "ROCM_AITER_TRITON_MLA", "ROCM_AITER_UNIFIED_ATTN", "ROCM_FLASH",
        "ROCM_AITER_MLA_VLLM_V1", "ROCM_FLASHMLA_SPARSE_DSV4", "ROCM_FLASHMLA_SPARSE_DSV41",
        "ROCM_SEGMENTED_ATTN", "ROCM_OCTAVE", "TRITON_ATTN", "TRITON_ATTN_VLLM_V1",
        "TRITON_MLA", "TRITON_MLA_VLLM_V1", "TURBOQUANT", "ULTRAQUANT",
    }
)  # fmt: skip
_CUDA_BACKENDS = frozenset(
    {
        "FLASH_ATTN", "FLASH_ATTN_VLLM_V1", "FLASHINFER", "FLASHINFER_VLLM_V1",
        "FLASHINFER_MLA", "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90",
        "FLASHINFER_MLA_SPARSE_SM120", "FLASHMLA", "FLASHMLA_VLLM_V1", "FLASHMLA_SPARSE",
        "FLASH_ATTN_MLA", "FLASH_ATTN_MLA_SPARSE", "CUTLASS_MLA", "CUTLASS_MLA_VLLM_V1",
        "FLEX_ATTENTION", "TOKENSPEED_MLA", "TRITON_ATTN", "TRITON_ATTN_VLLM_V1",
        "TRITON_FLASHINFER", "TRITON_FLASH_ATTN", "TRITON_MLA", "TRITON_MLA_VLLM_V1",
        "TURBOQUANT", "XFORMERS", "XFORMERS_VLLM_V1", "TREE_ATTN",
    }
)  # fmt: skip
_CPU_BACKENDS = frozenset({"CPU_ATTN", "CPU_MLA", "AMX_MLA", "TORCH_SDPA", "TORCH_SDPA_VLLM_V1"})

# How each backend copes with CUDA graphs, from
# 000_cadfc2653427814e.txt §CUDA graphs configuration ("Backend compatibility").
CUDAGRAPH_SUPPORT: dict[str, str] = {
    "TRITON_ATTN": "full",
    "ROCM_AITER_UNIFIED_ATTN": "full",
    "ROCM_ATTN": "full",
    "ROCM_AITER_FA": "uniform-batches",
    "ROCM_AITER_MLA": "uniform-batches",
    "TRITON_MLA": "piecewise-only",
}


def values_for(name: str, version: str | None = None) -> tuple[str, ...]:
    """The values of value set ``name`` that ``version`` accepts (all if None).

    Raises:
        KeyError: for an unknown value-set name (a programming error).
    """
    return tuple(v.name for v in VALUE_SETS[name] if v.present_in(version))


def lookup(name: str, value: str) -> VersionedValue | None:
    """The entry for ``value`` in value set ``name`` (None if the table never saw it)."""
    for item in VALUE_SETS[name]:
        if item.name == value:
            return item
    return None


# Backends a platform's selector accepted in some releases only: FLEX_ATTENTION
# had a branch in vllm/platforms/rocm.py in the 0.11-0.13 releases (the range
# from issue 14's audit of those releases; not re-read for tunelab).
_ROCM_RANGED: dict[str, tuple[str | None, str | None]] = {"FLEX_ATTENTION": ("0.11.0", "0.14.0")}


def backend_platforms(backend: str, version: str | None = None) -> frozenset[str] | None:
    """The platforms whose vLLM ``version`` can select ``backend``; None if this table does not know.

    With ``version`` None every release counts (a backend a platform ever had).
    """
    ranged = _ROCM_RANGED.get(backend)
    extra = set()
    if ranged is not None and (version is None or in_range(version, *ranged) == 0):
        extra.add("rocm")
    found = extra | {
        plat
        for plat, names in (
            ("rocm", _ROCM_BACKENDS),
            ("cuda", _CUDA_BACKENDS),
            ("cpu", _CPU_BACKENDS),
        )
        if backend in names
    }
    return frozenset(found) if found else None


def backend_is_mla(backend: str) -> bool:
    """True for MLA (multi-head latent attention) backends, by vLLM's naming.

    vLLM names every MLA backend with ``MLA`` in it, and the sparse DeepSeek
    (DSA) backends with ``SPARSE``/``DSV4``; both need an MLA model.
    """
    return "MLA" in backend or "DSV4" in backend or backend.endswith("_DSA")
