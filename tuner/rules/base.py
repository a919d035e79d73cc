"""What every rule needs: a view of the config on its target, and the rule registry.

Rules are small functions registered with :func:`rule`; each reads a
:class:`Context` (the config's effective values with vLLM's defaults, the
model, the target, the workload) and yields findings. Keeping the reading of
env strings, defaults and version comparisons here means each rule states only
its condition and its message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tuner.config import EngineConfig, is_env_key
from tuner.knobs import get as knob_for
from tuner.knobs.value_sets import values_for
from tuner.knobs.versions import parse_version
from tuner.model.info import ModelInfo
from tuner.rules.backend_facts import attention_table, layer_facts, rocm_pick
from tuner.rules.facts import ROCM_ATTN_FIRST_SINCE, UNIFIED_BACKEND_SINCE
from tuner.rules.types import Finding, Target, WorkloadShape

AITER = "VLLM_ROCM_USE_AITER"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

RuleFn = Callable[["Context"], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A registered rule: its id and its function."""

    id: str
    fn: RuleFn


RULES: list[Rule] = []


def rule(rule_id: str) -> Callable[[RuleFn], RuleFn]:
    """Registers a rule function under ``rule_id`` (ids are unique)."""

    def register(fn: RuleFn) -> RuleFn:
        if any(r.id == rule_id for r in RULES):
            raise ValueError(f"rule id {rule_id!r} registered twice")
        RULES.append(Rule(rule_id, fn))
        return fn

    return register


def knob_default(key: str) -> Any:
    """vLLM's default for ``key`` from the catalogue (None when the catalogue has no such knob)."""
    knob = knob_for(key)
    return knob.default if knob is not None else None


def truthy(value: Any) -> bool | None:
    """Reads a bool the way vLLM reads env vars; None when it is not a bool at all."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    return None


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """Release numbers of a version, None when unknown or unparsable."""
    if not text:
        return None
    try:
        return parse_version(text)
    except ValueError:
        return None


@dataclass
class Context:
    """A config seen on its target; the one thing every rule reads."""

    config: EngineConfig
    model: ModelInfo | None
    target: Target
    workload: WorkloadShape | None

    # -- raw values -------------------------------------------------------
    def is_set(self, key: str) -> bool:
        """True when the config sets ``key`` itself."""
        return (key in self.config.env) if is_env_key(key) else (key in self.config.engine)

    def value(self, key: str, default: Any = None) -> Any:
        """The config's value for ``key``, else ``default``, else the catalogue default."""
        if self.is_set(key):
            return self.config.get(key)
        return default if default is not None else knob_default(key)

    def flag(self, key: str, default: bool | None = None) -> bool:
        """A switch's effective state (set value, else ``default``, else vLLM's default)."""
        state = truthy(self.value(key, default))
        return bool(state)

    def int_value(self, key: str, default: int | None = None) -> int | None:
        """An integer knob's effective value (None if unset and no default)."""
        raw = self.value(key, default)
        try:
            return int(raw) if raw is not None and not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            return None

    # -- target -------------------------------------------------------------
    @property
    def platform(self) -> str | None:
        """The target platform (rocm/cuda/cpu) or None."""
        return (self.target.platform or "").lower() or None

    @property
    def rocm(self) -> bool:
        """True when the target is a ROCm node."""
        return self.platform == "rocm"

    @property
    def cuda(self) -> bool:
        """True when the target is an NVIDIA (CUDA) node."""
        return self.platform == "cuda"

    def version_lt(self, version: str) -> bool | None:
        """Target vLLM older than ``version``; None when the target version is unknown."""
        mine = version_tuple(self.target.vllm_version)
        return None if mine is None else mine < parse_version(version)

    @property
    def aiter_on(self) -> bool:
        """AITER's master switch is on."""
        return self.flag(AITER, False)

    def backends(self) -> tuple[str, ...] | None:
        """Attention backend names the target accepts (introspected, else catalogue)."""
        if self.target.attention_backends:
            return self.target.attention_backends
        return values_for("attention_backends", self.target.vllm_version)

    @property
    def backend(self) -> str | None:
        """The backend the config names explicitly (``attention-backend``)."""
        raw = self.config.engine.get("attention-backend") or self.config.env.get(
            "VLLM_ATTENTION_BACKEND"
        )
        return str(raw).strip().upper() if raw else None

    def effective_backend(self) -> str | None:
        """The backend vLLM will use on ROCm, by the selector of the target release.

        The explicit ``attention-backend`` wins. Otherwise (ROCm only; the raw
        file names are the reference documents):

        * ≥ 0.19 (vllm/platforms/rocm.py ``_get_backend_priorities``, PR #36702):
          DSA models → ROCM_AITER_MLA_SPARSE; MLA → ROCM_AITER_MLA with AITER
          (and its MLA flag) on, else TRITON_MLA; everything else → ROCM_ATTN
          first, except sink models (ROCM_ATTN ``supports_sink`` is False):
          ROCM_AITER_FA with AITER MHA on, else ROCM_AITER_UNIFIED_ATTN.
        * 0.11.1-0.18: AITER on + VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION=1 picks
          unified attention first ("Priority 1 ... must check before MHA"),
          then AITER MHA, then ROCM_ATTN with the prefill-decode switch, then
          TRITON_ATTN (000_cadfc2653427814e.txt §Attention backend selection
          with AITER describes this order minus the unified-first step).
        * earlier, or an unknown version: the same without the unified step.
        """
        if self.backend:
            return self.backend
        if self.cuda and self.model is not None:
            return self._cuda_backend()
        if not self.rocm or self.model is None:
            return None
        if self.version_lt(ROCM_ATTN_FIRST_SINCE) is False:
            return self._backend_since_019()
        if self.model.is_mla:
            aiter_mla = self.aiter_on and self.flag("VLLM_ROCM_USE_AITER_MLA", True)
            return "ROCM_AITER_MLA" if aiter_mla else "TRITON_MLA"
        unified_first = self.version_lt(UNIFIED_BACKEND_SINCE) is False
        unified = self.aiter_on and self.flag("VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION", False)
        if unified_first and unified:
            return "ROCM_AITER_UNIFIED_ATTN"
        if self.aiter_on and self.flag("VLLM_ROCM_USE_AITER_MHA", True):
            return "ROCM_AITER_FA"
        if self.flag("VLLM_V1_USE_PREFILL_DECODE_ATTENTION", False):
            return "ROCM_ATTN"
        if unified:
            return "ROCM_AITER_UNIFIED_ATTN"
        return "TRITON_ATTN"

    def _cuda_backend(self) -> str | None:
        """vLLM's CUDA walk over the release's priority list (None: no table, or unknown)."""
        table, facts = attention_table(self), layer_facts(self)
        if table is None or facts is None:
            return None
        return table.cuda_choice(facts)[0]

    def _backend_since_019(self) -> str:
        """vLLM ≥ 0.19's ROCm priority list (see :meth:`effective_backend`).

        Where the target's release has a generated table, vLLM's own walk over it decides
        (:func:`tuner.rules.backend_facts.rocm_pick`); the hand-read order below is for
        releases without one.
        """
        assert self.model is not None
        table, facts = attention_table(self), layer_facts(self)
        if table is not None and facts is not None:
            picked, _ = rocm_pick(self, table, facts)
            if picked:
                return picked
        if self.model.is_sparse_attention:
            return "ROCM_AITER_MLA_SPARSE"
        if self.model.is_mla:
            aiter_mla = self.aiter_on and self.flag("VLLM_ROCM_USE_AITER_MLA", True)
            return "ROCM_AITER_MLA" if aiter_mla else "TRITON_MLA"
        if self.model.has_sinks:
            if self.aiter_on and self.flag("VLLM_ROCM_USE_AITER_MHA", True):
                return "ROCM_AITER_FA"
            return "ROCM_AITER_UNIFIED_ATTN"
        return "ROCM_ATTN"

    # -- engine shape -------------------------------------------------------
    @property
    def tp(self) -> int:
        """tensor-parallel-size (1 by default)."""
        return max(self.int_value("tensor-parallel-size", 1) or 1, 1)

    @property
    def pp(self) -> int:
        """pipeline-parallel-size (1 by default)."""
        return max(self.int_value("pipeline-parallel-size", 1) or 1, 1)

    @property
    def dp(self) -> int:
        """data-parallel-size (1 by default)."""
        return max(self.int_value("data-parallel-size", 1) or 1, 1)

    @property
    def world(self) -> int:
        """GPUs the engine uses: TP × PP × DP."""
        return self.tp * self.pp * self.dp

    @property
    def max_model_len(self) -> int | None:
        """max-model-len, else the model's own maximum (vLLM's default)."""
        if self.is_set("max-model-len"):
            return self.int_value("max-model-len")
        return self.model.max_position_embeddings if self.model else None

    @property
    def concurrency(self) -> int | None:
        """Requests in flight, from the workload."""
        return self.workload.concurrency if self.workload else None
