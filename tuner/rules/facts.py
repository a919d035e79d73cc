"""Version facts the rules depend on, each with where it was established.

The reference docs describe one moment of vLLM; these constants say from
which release a behaviour changed, read from vLLM's source and pull requests,
so a rule can apply the doc's advice only to the versions it is true for.
"""

from __future__ import annotations

R0 = "000_cadfc2653427814e.txt"
R1 = "001_0b441da10e6981c9.txt"
R2 = "002_61ffe81b0393820b.txt"
R3 = "003_383fc7ac89897e18.txt"
R4 = "004_c4561cd56ddb4be5.txt"

# AITER MLA needed --block-size 1 (vLLM raised otherwise) until the decoupled
# kernel block size landed: vllm-project/vllm PR #27715 (merged 2025-10-30),
# first released in 0.11.1.
AITER_MLA_ANY_BLOCK_SIZE_SINCE = "0.11.1"

# AITER's attention did not support an FP8 KV cache (003 §Known Issues, image
# with vLLM 0.9.1) until vllm-project/vllm PR #20295 (merged 2025-07), in 0.10.0.
AITER_FP8_KV_SINCE = "0.10.0"

# The ROCm selector consulted VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION until the
# selection was reordered into priority lists with ROCM_ATTN first
# (vllm-project/vllm PR #36702, first released in 0.19.0; tunelab cited #35246
# here before, which is not the reorder). From then on ROCM_AITER_UNIFIED_ATTN
# is reached only with --attention-backend (or as a fallback for sink models).
# Checked in the installed 0.32.0: vllm/platforms/rocm.py::_get_backend_priorities
# (lines 478-515) ignores it.
# The catalogue's ``no_effect_since`` for the knob (read per release) wins;
# this is the fallback when the catalogue has none.
UNIFIED_ENV_IGNORED_SINCE = "0.19.0"

# From 0.19.0 the ROCm selector tries ROCM_ATTN first for every non-MLA model
# that has no KV connector: VLLM_ROCM_USE_AITER=1 alone no longer gives AITER FA
# (vllm/platforms/rocm.py _get_backend_priorities lines 500-515 in 0.32.0;
# vllm-project/vllm PR #36702; acknowledged as a regression in issue #38627).
ROCM_ATTN_FIRST_SINCE = "0.19.0"
ROCM_ATTN_FIRST_SOURCE = (
    "vLLM source vllm/platforms/rocm.py _get_backend_priorities (0.32.0 lines 478-515); "
    "vllm-project/vllm PR #36702, issue #38627"
)
# ROCM_ATTN's custom paged-attention kernel applies only on CDNA with head size
# 64 or 128, block size 16 or 32, GQA ratio 1-16, max-model-len <= 128k, no
# sliding window and no sinks; otherwise it falls back to a Triton kernel
# (vllm/platforms/rocm.py use_rocm_custom_paged_attention, 0.32.0 lines 405-425).
ROCM_ATTN_CUSTOM_PA_SOURCE = (
    "vLLM source vllm/platforms/rocm.py use_rocm_custom_paged_attention (0.32.0 lines 405-425)"
)
# AITER MHA's smallest head size for its paged decode kernels; below it the
# decode falls back to unified attention, which asserts on the shuffled KV
# layout (vllm/v1/attention/backends/rocm_aiter_fa.py ~1363-1370, 0.32.0).
AITER_FA_MIN_HEAD_SIZE = 64

# ROCM_AITER_UNIFIED_ATTN became a backend name of its own in 0.11.1 (the
# catalogue's value set); before that the env trio was the only way.
UNIFIED_BACKEND_SINCE = "0.11.1"

# TRITON_MLA: the reference (000 §CUDA graphs configuration) says attention
# must stay out of the graph (PIECEWISE). vLLM 0.32.0's TritonMLAMetadataBuilder
# declares UNIFORM_BATCH support (checked in the installed source), so the
# stricter rule is applied before this version only.
TRITON_MLA_UNIFORM_SINCE = "0.32.0"

# vLLM sets VLLM_USE_TRITON_AWQ=1 itself on ROCm when --quantization awq
# (vllm/platforms/rocm.py lines 1154-1159 in 0.32.0, with a log line saying so).
# AWQ takes bfloat16 activations through auto_awq (present from 0.24.0;
# get_supported_act_dtypes returns half and bfloat16 in 0.32.0 auto_awq.py line 229).
AWQ_BF16_SINCE = "0.24.0"

# MoE activation density bands (001 §Parallelism strategies, decision table).
EP_DENSITY_STANDARD = 0.03
EP_DENSITY_ULTRA_SPARSE = 0.01
HIGH_CONCURRENCY = 512

# Concurrency from which the shuffled KV layout pays off (001 §AITER switches).
SHUFFLE_KV_MIN_CONCURRENCY = 32

# gpu-memory-utilization ceiling the reference recommends (000 §Configure the
# gpu-memory-utilization parameter: "up to 0.95").
MAX_RECOMMENDED_UTILIZATION = 0.95
