"""The vocabulary of the rules: findings, their severity, the target and the workload.

A finding is what a user reads (and what ``--json`` prints); the target is the
machine a config is meant for — introspected from the installed vLLM, or given
by hand when planning a preset for another node. Both are plain data so the
TUI, the CLI and export can show and store them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tuner.errors import TunelabError
from tuner.knobs.gpus import GpuSpec

if TYPE_CHECKING:  # the annotation only: reading a VllmInfo's fields needs no import at run time
    from tuner.introspect import VllmInfo


class Severity(StrEnum):
    """How much a finding matters: errors block a run."""

    ERROR = "error"
    WARNING = "warning"
    ADVICE = "advice"

    @property
    def rank(self) -> int:
        """Sort key: errors first (the declaration order above)."""
        return list(Severity).index(self)


@dataclass(frozen=True)
class Finding:
    """One thing the rules found about a config.

    Attributes:
        severity: error (blocks a run), warning, or advice.
        knobs: The catalogue keys it concerns.
        message: A sentence a user understands, saying what will happen.
        source: Where the rule comes from ("file name §section", or vLLM source).
        fix: Knob values that resolve it (None value = unset the knob); None if no fix.
        rule: The rule's id (stable, for tests and suppression).
    """

    severity: Severity
    knobs: tuple[str, ...]
    message: str
    source: str
    fix: dict[str, Any] | None = None
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``tunelab check --json``)."""
        return {
            "severity": str(self.severity),
            "rule": self.rule,
            "knobs": list(self.knobs),
            "message": self.message,
            "fix": self.fix,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Finding:
        """The finding back from its ``to_dict`` form (a stored trial, ``check --json``).

        For code that holds stored findings: test ``finding.severity is
        Severity.ERROR`` on the typed value instead of ``f["severity"] == "error"``.

        Raises:
            FindingFormatError: ``data`` is not a finding's dict (a hand-edited or
                foreign row); the message names what is wrong.
        """
        if not isinstance(data, dict):
            raise FindingFormatError(f"a finding is a table, not {type(data).__name__}")
        stated = data.get("severity")
        severities = {s.value: s for s in Severity}
        if not isinstance(stated, str) or stated not in severities:
            raise FindingFormatError(
                f"finding severity {stated!r} is not one of {', '.join(severities)}"
            )
        severity = severities[stated]
        knobs, fix = data.get("knobs") or [], data.get("fix")
        text = {k: data.get(k, "") for k in ("message", "source", "rule")}
        if not isinstance(knobs, list | tuple) or not all(isinstance(k, str) for k in knobs):
            raise FindingFormatError(f"finding knobs must be a list of names, not {knobs!r}")
        if fix is not None and not isinstance(fix, dict):
            raise FindingFormatError(f"finding fix must be a table or null, not {fix!r}")
        bad = [k for k, v in text.items() if not isinstance(v, str)]
        if bad:
            raise FindingFormatError(f"finding {', '.join(bad)} must be text")
        return cls(severity, tuple(knobs), text["message"], text["source"], fix, text["rule"])


class FindingFormatError(TunelabError, ValueError):
    """A stored finding that is not in ``Finding.to_dict`` form."""


@dataclass(frozen=True)
class Target:
    """Where a config will run: vLLM version, platform, GPUs.

    Attributes:
        vllm_version: Target vLLM version ("0.12.0"); None if unknown.
        platform: "rocm", "cuda" or "cpu"; None if unknown.
        gpus: GPUs on the node (the model-parallel group must fit in them).
        vram_gib: Memory of one GPU in GiB; None if unknown (fit rules stay silent).
        gpu_arch: GPU architecture such as gfx942, where known.
        gpu_name: The GPU model ("MI300X"), from ``--gpu`` or telemetry; None if unknown.
        partition: Compute partition mode of each device ("CPX"), None for whole GPUs.
        attention_backends: Backend names the target vLLM accepts (introspected);
            None: use the catalogue's list for ``vllm_version``.
        quantization_methods: Likewise for ``--quantization``.
        kv_cache_dtypes: Likewise for ``--kv-cache-dtype``.
        cudagraph_modes: Likewise for ``cudagraph_mode``.
        env_vars: Environment variable names the target vLLM reads; None if unknown.
        engine_args: Engine argument names (flags without dashes) it accepts; None if unknown.
        introspected: True when the lists come from the installed vLLM itself.
        note: Why the target is what it is (e.g. introspection failed: catalogue used).
    """

    vllm_version: str | None = None
    platform: str | None = None
    gpus: int = 1
    vram_gib: float | None = None
    gpu_arch: str | None = None
    gpu_name: str | None = None
    partition: str | None = None
    attention_backends: tuple[str, ...] | None = None
    quantization_methods: tuple[str, ...] | None = None
    kv_cache_dtypes: tuple[str, ...] | None = None
    cudagraph_modes: tuple[str, ...] | None = None
    env_vars: frozenset[str] | None = None
    engine_args: frozenset[str] | None = None
    introspected: bool = False
    note: str = ""

    @classmethod
    def from_introspection(
        cls, info: VllmInfo, *, gpus: int | None = None, vram_gib: float | None = None
    ) -> Target:
        """A target from what the installed vLLM says about itself.

        Args:
            info: The introspection result.
            gpus: GPU count (default 1: introspection does not count GPUs).
            vram_gib: Per-GPU memory (default unknown: introspection does not report it).
        """

        def tup(value: tuple[str, ...] | None) -> tuple[str, ...] | None:
            return tuple(value) if value else None

        return cls(
            vllm_version=info.version,
            platform=info.platform or None,
            # VllmInfo reports neither GPU count nor memory: those come from the caller
            # (telemetry or --gpu; tuner.lab.target decides which wins).
            gpus=gpus or 1,
            vram_gib=vram_gib,
            gpu_arch=info.gpu_arch,
            attention_backends=tup(info.attention_backends),
            quantization_methods=tup(info.quantization_methods),
            kv_cache_dtypes=tup(info.kv_cache_dtypes),
            cudagraph_modes=tup(info.cudagraph_modes),
            env_vars=frozenset(info.env_vars) if info.env_vars else None,
            engine_args=frozenset(info.engine_args) if info.engine_args else None,
            introspected=True,
        )

    def with_gpu(
        self, spec: GpuSpec | None, *, gpus: int | None = None, vram_gib: float | None = None
    ) -> Target:
        """This target on ``spec``'s GPUs; explicit ``gpus``/``vram_gib`` still win.

        The platform follows the GPU when the target has none (an MI300X is a ROCm node).
        """
        if spec is None:
            return self
        return replace(
            self,
            platform=self.platform or spec.platform,
            gpus=gpus or spec.count,
            vram_gib=vram_gib if vram_gib is not None else spec.hbm_gib,
            gpu_arch=spec.arch,
            gpu_name=spec.name,
            partition=spec.partition,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (lists left out: they are long and derivable)."""
        return {
            "vllm_version": self.vllm_version,
            "platform": self.platform,
            "gpus": self.gpus,
            "vram_gib": self.vram_gib,
            "gpu_arch": self.gpu_arch,
            "gpu_name": self.gpu_name,
            "partition": self.partition,
            "introspected": self.introspected,
            "note": self.note,
        }


GOALS = ("interactive", "streaming", "offline")


@dataclass(frozen=True)
class WorkloadShape:
    """What the engine will be asked to serve (the parts the rules need).

    Attributes:
        input_len: Prompt tokens per request.
        output_len: Generated tokens per request.
        concurrency: Requests in flight.
        goal: interactive (low TTFT), streaming (low ITL) or offline (throughput).
    """

    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    goal: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_workload(cls, workload: Any, goal: str | None = None) -> WorkloadShape:
        """From ``tuner.bench.workload.Workload`` (read by attribute)."""
        ratio = float(getattr(workload, "range_ratio", 0.0) or 0.0)
        inp = getattr(workload, "input_len", None)
        out = getattr(workload, "output_len", None)
        if ratio and inp:
            inp = int(inp * (1 + ratio))
        if ratio and out:
            out = int(out * (1 + ratio))
        return cls(inp, out, getattr(workload, "concurrency", None), goal)

    @property
    def sequence_len(self) -> int | None:
        """Input + output tokens of one request (what max-model-len must hold)."""
        if self.input_len is None or self.output_len is None:
            return None
        return self.input_len + self.output_len
