"""Does a model fit? Weights per GPU plus the KV cache a workload needs, against VRAM.

vLLM reserves ``VRAM × gpu-memory-utilization`` per GPU, loads its share of
the weights, keeps some room for activations and graphs, and turns the rest
into KV cache. It refuses to start when one ``max-model-len`` sequence does not
fit, and it serves fewer requests at once than ``max-num-seqs`` when their KV
does not fit (reference 004 §5; reference 000 §Configure --max-num-seqs:
"KV-cache token requirements are computed as max-num-seqs * max-model-len").

Parallelism decides each GPU's share. Tensor parallelism splits weights and
KV heads (MLA's latent KV is replicated on every TP rank); pipeline
parallelism splits layers; data parallelism replicates the model per DP rank
and gives each rank 1/DP of the requests (its own scheduler and its own
``max-num-seqs``: vLLM ``config/parallel.py``, one engine core per DP rank).
With ``--enable-expert-parallel`` the routed experts are sharded over all
TP × DP ranks of a stage instead (EP size = TP × DP, vLLM
``config/parallel.py`` / ``FusedMoEParallelConfig.make``), while attention,
dense layers and shared experts stay replicated per DP rank (reference 001
§Data Parallel Attention (advanced)).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from tuner.model.info import ModelInfo

GIB = 1024**3
# Activation peak, CUDA/HIP graphs and allocator slack that vLLM's profiling
# takes before the KV cache: typically 1-4 GiB per GPU for serving sizes.
DEFAULT_OVERHEAD_BYTES = 2 * GIB
# vLLM V1's default --max-num-seqs per reference 000 §Configure --max-num-seqs
# on a >= 70 GiB GPU; callers pass tuner.knobs.defaults.batch_defaults' value.
DEFAULT_MAX_NUM_SEQS = 1024
# vLLM 0.32's default (vllm/config/cache.py line 102); 0.9 before, see
# tuner.knobs.defaults.gpu_memory_utilization_default.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92


@dataclass(frozen=True)
class FitEstimate:
    """The memory budget of one GPU of the model-parallel group.

    Attributes:
        usable_bytes_per_gpu: VRAM × gpu-memory-utilization.
        weights_bytes_per_gpu: The model's share of weights on one GPU.
        overhead_bytes_per_gpu: Activation/graph reserve assumed.
        kv_budget_bytes_per_gpu: What is left for KV cache (negative: weights do not fit).
        kv_bytes_per_token_per_gpu: KV bytes one token takes on one GPU.
        kv_tokens_fit: Tokens of KV cache the budget holds.
        tokens_needed: Tokens the config or workload asks for.
        max_model_len: Longest sequence the engine must hold.
        max_num_seqs: Concurrent sequences asked for.
        weights_fit: The weights fit at all.
        holds_one_sequence: One max-model-len sequence fits (else vLLM refuses to start).
        fits: Weights fit and all needed tokens fit.
        state_tokens_per_request: A request's length-independent cache (an
            encoder-decoder's cross-attention K/V) in KV tokens of this GPU;
            counted in ``tokens_needed`` for every request held at once.
    """

    usable_bytes_per_gpu: int
    weights_bytes_per_gpu: int
    overhead_bytes_per_gpu: int
    kv_budget_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    kv_tokens_fit: int
    tokens_needed: int
    max_model_len: int
    max_num_seqs: int
    weights_fit: bool
    holds_one_sequence: bool
    fits: bool
    state_tokens_per_request: int = 0

    @property
    def max_concurrent_sequences(self) -> int:
        """Full-length sequences the KV cache holds at once (each with its per-request state)."""
        per_sequence = self.max_model_len + self.state_tokens_per_request
        return self.kv_tokens_fit // per_sequence if self.max_model_len else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        out = asdict(self)
        out["max_concurrent_sequences"] = self.max_concurrent_sequences
        return out


def kv_bytes_per_token_per_gpu(
    info: ModelInfo,
    kv_cache_dtype: str | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
) -> int:
    """KV bytes per token on one GPU: TP splits KV heads (MLA's latent is replicated), PP splits layers."""
    per_token = info.kv_bytes_per_token(kv_cache_dtype)
    layers_share = 1 / max(pipeline_parallel_size, 1)
    if info.is_mla:
        # TP replicates MLA's latent KV on every rank (reference 001 §Tensor parallelism note).
        return math.ceil(per_token * layers_share)
    tp = max(tensor_parallel_size, 1)
    heads_per_rank = math.ceil(info.num_kv_heads / tp)
    return math.ceil(per_token * heads_per_rank / info.num_kv_heads * layers_share)


def request_state_bytes_per_gpu(
    info: ModelInfo,
    kv_cache_dtype: str | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
) -> int:
    """A request's length-independent cache on one GPU: cross-attention split as the KV heads
    are, a hybrid's recurrent state by TP (vLLM divides its heads), both by PP (layers)."""
    tp, pp = max(tensor_parallel_size, 1), max(pipeline_parallel_size, 1)
    cross = float(info.cross_attention_bytes(kv_cache_dtype))
    if cross:
        cross *= math.ceil(info.num_kv_heads / tp) / info.num_kv_heads
    return math.ceil((cross + info.recurrent_state_bytes() / tp) / pp)


def weights_per_gpu(
    info: ModelInfo,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    data_parallel_size: int = 1,
    expert_parallel: bool = False,
) -> int:
    """Weight bytes on one GPU: TP × PP split everything; EP adds DP to the routed experts' split."""
    group = max(tensor_parallel_size, 1) * max(pipeline_parallel_size, 1)
    routed = info.weight_bytes * info.routed_expert_share if info.is_moe else 0.0
    rest = info.weight_bytes - routed
    expert_group = group * (max(data_parallel_size, 1) if expert_parallel else 1)
    return math.ceil(rest / group + routed / expert_group)


def fit(
    info: ModelInfo,
    *,
    gpus: int = 1,
    vram_bytes_per_gpu: int,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    data_parallel_size: int = 1,
    expert_parallel: bool = False,
    max_num_seqs: int | None = None,
    max_model_len: int | None = None,
    kv_cache_dtype: str | None = "auto",
    tokens_needed: int | None = None,
    overhead_bytes_per_gpu: int = DEFAULT_OVERHEAD_BYTES,
    requests: int | None = None,
) -> FitEstimate:
    """Estimates whether ``info`` fits the GPUs with these settings.

    Args:
        info: The model.
        gpus: GPUs available (only used to sanity-check the parallel sizes).
        vram_bytes_per_gpu: Memory of one GPU.
        gpu_memory_utilization: vLLM's share of it.
        tensor_parallel_size: TP size; weights and KV heads split across it.
        pipeline_parallel_size: PP size; layers split across it.
        data_parallel_size: DP size; each rank holds the whole (non-EP) model and
            1/DP of ``tokens_needed``.
        expert_parallel: ``--enable-expert-parallel``: routed experts split over TP × DP.
        max_num_seqs: Concurrent sequences per DP rank (default 1024, vLLM V1's).
        max_model_len: Longest sequence (default: the model's max positions).
        kv_cache_dtype: ``auto`` or ``fp8``/``fp8_e4m3``/``fp8_e5m2`` (1 byte).
        tokens_needed: The workload's real need over all DP ranks (concurrency ×
            (input + output)); default max_num_seqs × max_model_len per rank.
        overhead_bytes_per_gpu: Reserve for activations and graphs.
        requests: Requests held at once over all DP ranks (the workload's
            concurrency); default max_num_seqs per rank. Each adds the model's
            per-request state (ModelInfo.request_state_bytes) to the need.
    """
    del gpus  # the rules compare TP×PP with the GPU count; the estimate is per GPU
    seqs = max_num_seqs or DEFAULT_MAX_NUM_SEQS
    length = max_model_len or info.max_position_embeddings or 8192
    usable = int(vram_bytes_per_gpu * gpu_memory_utilization)
    weights = weights_per_gpu(
        info,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size,
        expert_parallel=expert_parallel,
    )
    budget = usable - weights - overhead_bytes_per_gpu
    per_token = max(
        kv_bytes_per_token_per_gpu(
            info, kv_cache_dtype, tensor_parallel_size, pipeline_parallel_size
        ),
        1,
    )
    fit_tokens = max(budget, 0) // per_token
    dp = max(data_parallel_size, 1)
    need = math.ceil(tokens_needed / dp) if tokens_needed is not None else seqs * length
    state = request_state_bytes_per_gpu(
        info, kv_cache_dtype, tensor_parallel_size, pipeline_parallel_size
    )
    state_tokens = math.ceil(state / per_token)
    need += (math.ceil(requests / dp) if requests is not None else seqs) * state_tokens
    return FitEstimate(
        usable_bytes_per_gpu=usable,
        weights_bytes_per_gpu=weights,
        overhead_bytes_per_gpu=overhead_bytes_per_gpu,
        kv_budget_bytes_per_gpu=budget,
        kv_bytes_per_token_per_gpu=per_token,
        kv_tokens_fit=int(fit_tokens),
        tokens_needed=int(need),
        max_model_len=int(length),
        max_num_seqs=int(seqs),
        weights_fit=weights + overhead_bytes_per_gpu <= usable,
        holds_one_sequence=fit_tokens >= length + state_tokens,
        fits=budget > 0 and fit_tokens >= need,
        state_tokens_per_request=state_tokens,
    )
