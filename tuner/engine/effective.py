"""What vLLM really ran: the effective config read from its start-up log, against the request.

vLLM resolves, and sometimes overrides, what it was asked for: on CPU it runs
CPU_ATTN whatever ``--attention-backend`` says ("Cannot use
AttentionBackendEnum.TORCH_SDPA backend on CPU.", 0.32 platforms/cpu.py ~178)
and switches ``cudagraph_mode`` FULL to NONE without a warning (0.32
config/vllm.py ~1930, the ``else`` of ``support_static_graph_mode``). A trial
that records only the request would compare arms that did not differ. The
evidence is vLLM's own log:

- ``Initializing a V1 LLM engine (v0.32.0) with config: model=..., dtype=...,
  compilation_config={... 'cudagraph_mode': <CUDAGraphMode.NONE: 0> ...}``
  (``VllmConfig.__str__``, 0.32 config/vllm.py ~2700): the resolved values;
- the attention backend lines (tuner.engine.logscan);
- override warnings ("Overriding cudagraph_mode from X to Y", "Async
  scheduling ... will be disabled", "Chunked prefill is enabled with
  max_num_batched_tokens=N", 0.32 config/vllm.py and config/scheduler.py ~308).

Knobs vLLM does not log a resolved value for (``max-num-seqs``, ``block-size``
...) are not compared: their absence is not evidence. The result is plain
dataclasses for the CLI and the TUI, and a dict at the store's JSON boundary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tuner.bounded import loads as json_loads
from tuner.config import COMPILATION_FIELDS
from tuner.engine import logscan

RULE_ID = "effective-differs"
_EVIDENCE_CHARS = 300

_CONFIG_MARK = "with config: "
_ENGINE_LINE_RE = re.compile(r"Initializing a V1 LLM engine \((?P<version>[^)]*)\) with config: ")
_FIELD_RE = re.compile(r"(?:^|, )(?P<key>[a-z_]+)=")
_CUDAGRAPH_IN_CONFIG_RE = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(?P<mode>[A-Z_]+)")
_CUDAGRAPH_OVERRIDE_RE = re.compile(
    r"Overriding cudagraph_mode (?:from \w+ )?to (?P<mode>[A-Z_]+)", re.IGNORECASE
)
_EAGER_NO_GRAPHS = "Cudagraph is disabled under eager mode"
_ASYNC_OFF_RE = re.compile(r"Async scheduling .*(?:disabled|not supported|not compatible)")
_MBT_RE = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)")
_NON_DEFAULT_RE = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")

# Fields of VllmConfig.__str__ (0.32 config/vllm.py ~2700) -> tunelab knob (CLI form).
_CONFIG_FIELDS = {
    "dtype": "dtype",
    "max_seq_len": "max-model-len",
    "tensor_parallel_size": "tensor-parallel-size",
    "pipeline_parallel_size": "pipeline-parallel-size",
    "data_parallel_size": "data-parallel-size",
    "quantization": "quantization",
    "enforce_eager": "enforce-eager",
    "kv_cache_dtype": "kv-cache-dtype",
    "enable_prefix_caching": "enable-prefix-caching",
    "enable_chunked_prefill": "enable-chunked-prefill",
}
# Requested spellings vLLM resolves to another name (0.32 config/model.py _STR_DTYPE_TO_TORCH_DTYPE).
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16"}
# A request of these means "vLLM decides": nothing to compare.
_UNDECIDED = {"auto", "none", ""}


@dataclass(frozen=True)
class EffectiveValue:
    """One knob's value as vLLM ran it.

    Attributes:
        knob: tunelab knob name (``cudagraph-mode``).
        value: The value as a string (``NONE``, ``CPU_ATTN``, ``2048``, ``True``).
        evidence: The log line it was read from (prefix stripped, shortened).
    """

    knob: str
    value: str
    evidence: str


@dataclass(frozen=True)
class Mismatch:
    """A knob whose effective value differs from the request.

    Attributes:
        knob: tunelab knob name.
        requested: What the config asked for.
        effective: What vLLM ran.
        evidence: The log line that shows it.
    """

    knob: str
    requested: str
    effective: str
    evidence: str

    def message(self) -> str:
        """One sentence a user can act on."""
        return (
            f"requested {self.knob}={self.requested}, but vLLM ran {self.effective} "
            f"(engine log: {self.evidence})"
        )


@dataclass(frozen=True)
class EffectiveConfig:
    """The effective values read from one engine start and how they differ from the request.

    Attributes:
        values: Effective value per knob, where vLLM logged one.
        received: vLLM's ``non-default args`` (what its argument parser got), raw text.
        vllm_version: The version in the engine line, when logged.
        mismatches: Requested knobs whose effective value differs.
    """

    values: dict[str, EffectiveValue] = field(default_factory=dict)
    received: str | None = None
    vllm_version: str | None = None
    mismatches: tuple[Mismatch, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the trial store."""
        return {
            "values": {k: {"value": v.value, "evidence": v.evidence} for k, v in self.values.items()},
            "received": self.received,
            "vllm_version": self.vllm_version,
            "mismatches": [
                {"knob": m.knob, "requested": m.requested, "effective": m.effective,
                 "evidence": m.evidence}
                for m in self.mismatches
            ],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EffectiveConfig:
        """Inverse of to_dict."""
        values = {
            k: EffectiveValue(k, str(v["value"]), str(v.get("evidence", "")))
            for k, v in (data.get("values") or {}).items()
        }
        mismatches = tuple(
            Mismatch(str(m["knob"]), str(m["requested"]), str(m["effective"]), str(m["evidence"]))
            for m in data.get("mismatches") or []
        )
        return cls(values, data.get("received"), data.get("vllm_version"), mismatches)


def _short(line: str) -> str:
    text = logscan.strip_prefix(line)
    return text if len(text) <= _EVIDENCE_CHARS else text[: _EVIDENCE_CHARS - 1] + "…"


def _config_fields(text: str) -> dict[str, str]:
    """Top-level ``key=value`` pairs of VllmConfig.__str__ (values may nest brackets)."""
    out: dict[str, str] = {}
    matches = [m for m in _FIELD_RE.finditer(text) if _depth(text, m.start()) == 0]
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out[match.group("key")] = text[match.end() : end].strip()
    return out


def _depth(text: str, pos: int) -> int:
    """Bracket nesting at ``pos`` (quotes are not tracked: vLLM's repr keeps them balanced)."""
    depth = 0
    for ch in text[:pos]:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
    return depth


def _engine_values(line: str) -> dict[str, EffectiveValue]:
    text = logscan.strip_prefix(line)
    body = text.split(_CONFIG_MARK, 1)[1]
    fields_ = _config_fields(body)
    values: dict[str, EffectiveValue] = {}
    for name, knob in _CONFIG_FIELDS.items():
        raw = fields_.get(name)
        if raw is None:
            continue
        value = raw.strip("'\"")
        if name == "dtype":
            value = value.removeprefix("torch.")
        values[knob] = EffectiveValue(knob, value, _short(f"... {name}={raw} ..."))
    graph = _CUDAGRAPH_IN_CONFIG_RE.search(fields_.get("compilation_config", ""))
    if graph:
        values["cudagraph-mode"] = EffectiveValue(
            "cudagraph-mode",
            graph.group("mode"),
            f"Initializing a V1 LLM engine ... compilation_config={{... 'cudagraph_mode': "
            f"<CUDAGraphMode.{graph.group('mode')}> ...}}",
        )
    return values


def parse_log(lines: Iterable[str], backend: str | None = None) -> EffectiveConfig:
    """Reads the effective values out of one engine start's log lines.

    Args:
        lines: The log of one start (see ``start_lines``).
        backend: The backend the engine reported or its platform implies
            (``Engine.backend``), used when no line names it.
    """
    values: dict[str, EffectiveValue] = {}
    received: str | None = None
    version: str | None = None
    rejected: str | None = None
    for line in lines:
        engine = _ENGINE_LINE_RE.search(line)
        if engine:
            version = engine.group("version")
            values.update(_engine_values(line))
            continue
        override = _CUDAGRAPH_OVERRIDE_RE.search(line)
        if override:
            values["cudagraph-mode"] = EffectiveValue(
                "cudagraph-mode", override["mode"].upper(), _short(line)
            )
        elif _EAGER_NO_GRAPHS in line:
            values["cudagraph-mode"] = EffectiveValue("cudagraph-mode", "NONE", _short(line))
        if _ASYNC_OFF_RE.search(line):
            values["async-scheduling"] = EffectiveValue("async-scheduling", "False", _short(line))
        mbt = _MBT_RE.search(line)
        if mbt:
            values["max-num-batched-tokens"] = EffectiveValue(
                "max-num-batched-tokens", mbt["n"], _short(line)
            )
        nondefault = _NON_DEFAULT_RE.search(logscan.strip_prefix(line))
        if nondefault:
            received = nondefault.group("args")
        name = logscan.backend_from_line(line)
        if name and "attention-backend" not in values:
            values["attention-backend"] = EffectiveValue("attention-backend", name, _short(line))
        refused = logscan.rejected_backend(line)
        if refused:
            rejected = _short(line)
    if "attention-backend" not in values and backend:
        # CPU_ATTN is never announced on CPU (0.32 cpu.py ~178 returns it silently):
        # the refusal line, when there is one, is the evidence.
        values["attention-backend"] = EffectiveValue(
            "attention-backend", backend, rejected or "the platform's only backend (not logged)"
        )
    return EffectiveConfig(values, received, version)  # fmt: skip


def _norm(knob: str, value: object) -> str:
    text = str(value).strip()
    if isinstance(value, bool) or text.lower() in {"true", "false"}:
        return text.lower()
    if knob == "dtype":
        return _DTYPE_ALIASES.get(text.lower(), text.lower())
    if knob in {"attention-backend", "cudagraph-mode"}:
        return text.upper()
    return text.lower()


def requested_knobs(engine: Mapping[str, object]) -> dict[str, object]:
    """The knobs a config sets, in tunelab's flat form (``cudagraph-mode`` unfolded).

    ``cudagraph-mode`` may arrive folded into ``compilation-config`` JSON
    (tuner.config COMPILATION_FIELDS); it is compared as its own knob.
    """
    out = dict(engine)
    compilation = engine.get("compilation-config")
    if isinstance(compilation, str):
        try:
            compilation = json_loads(compilation, what="compilation-config")
        except ValueError:
            compilation = None
    if isinstance(compilation, Mapping):
        for knob, key in COMPILATION_FIELDS.items():
            if key in compilation and knob not in out:
                out[knob] = compilation[key]
    return out


def compare(engine: Mapping[str, object], effective: EffectiveConfig) -> EffectiveConfig:
    """The same EffectiveConfig with the mismatches against the requested ``engine`` knobs.

    A flag knob requested ``True`` (``enforce-eager``) compares with vLLM's
    ``True``; a request of ``auto`` is vLLM's choice and never a mismatch.
    """
    found: list[Mismatch] = []
    for knob, wanted in requested_knobs(engine).items():
        seen = effective.values.get(knob)
        if seen is None or wanted is None or str(wanted).strip().lower() in _UNDECIDED:
            continue
        if _norm(knob, wanted) != _norm(knob, seen.value):
            found.append(Mismatch(knob, str(wanted), seen.value, seen.evidence))
    return EffectiveConfig(
        effective.values, effective.received, effective.vllm_version, tuple(found)
    )


def start_lines(log_path: str | Path) -> list[str]:
    """The lines of the last engine start in a trial's log (from the last ``[tunelab] $`` line)."""
    try:
        text = Path(log_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("[tunelab] $ ")]
    return lines[starts[-1] :] if starts else lines


def read_effective(
    log_path: str | Path, engine: Mapping[str, object], backend: str | None = None
) -> EffectiveConfig:
    """Effective config and mismatches of the last start logged at ``log_path``."""
    return compare(engine, parse_log(start_lines(log_path), backend))


def of_trial(effective: Mapping[str, Any] | None) -> EffectiveConfig | None:
    """The typed EffectiveConfig of a stored trial's ``effective`` field (None if not recorded)."""
    return EffectiveConfig.from_dict(effective) if effective else None


@dataclass(frozen=True)
class ArmDifference:
    """One knob as the two arms of an A/B asked for it and as vLLM ran it.

    Attributes:
        knob: tunelab knob name.
        a_requested, b_requested: The arms' requests (``default`` when unset).
        a_effective, b_effective: What vLLM ran (None when its log does not say).
    """

    knob: str
    a_requested: str
    b_requested: str
    a_effective: str | None
    b_effective: str | None

    @property
    def tested(self) -> bool | None:
        """Whether the arms really ran different values (None: the log does not say)."""
        if self.a_effective is None or self.b_effective is None:
            return None
        return _norm(self.knob, self.a_effective) != _norm(self.knob, self.b_effective)

    def note(self) -> str:
        """One sentence for the A/B report."""
        asked = f"requested A={self.a_requested}, B={self.b_requested}"
        if self.tested is None:
            return f"{self.knob}: {asked} (vLLM's log does not show the value it ran)"
        if not self.tested:
            return (
                f"{self.knob}: {asked}, but both arms ran {self.a_effective}: "
                "this A/B did not change it"
            )
        return f"{self.knob}: {asked}; vLLM ran A={self.a_effective}, B={self.b_effective}"


def arm_differences(
    a_engine: Mapping[str, object],
    a_effective: EffectiveConfig | None,
    b_engine: Mapping[str, object],
    b_effective: EffectiveConfig | None,
) -> list[ArmDifference]:
    """What differed between two arms: in the request, in what vLLM ran, or both.

    A knob the arms request alike but vLLM ran differently (a backend chosen
    from the environment, say) is listed too: it is a difference the
    config hash does not show.
    """
    a_req, b_req = requested_knobs(a_engine), requested_knobs(b_engine)
    a_vals = a_effective.values if a_effective else {}
    b_vals = b_effective.values if b_effective else {}
    out: list[ArmDifference] = []
    for knob in sorted(set(a_req) | set(b_req) | set(a_vals) | set(b_vals)):
        if knob == "compilation-config":
            continue
        ra, rb = str(a_req.get(knob, "default")), str(b_req.get(knob, "default"))
        ea = a_vals[knob].value if knob in a_vals else None
        eb = b_vals[knob].value if knob in b_vals else None
        ran_apart = ea is not None and eb is not None and _norm(knob, ea) != _norm(knob, eb)
        if _norm(knob, ra) != _norm(knob, rb) or ran_apart:
            out.append(ArmDifference(knob, ra, rb, ea, eb))
    return out


class _RanTrial(Protocol):
    """What arms_differences reads of a trial (tuner.trials.model.Trial; no import cycle)."""

    @property
    def config(self) -> Any: ...  # EngineConfig: .engine is the knob mapping

    @property
    def effective(self) -> dict[str, Any] | None: ...


def arms_differences(a: Sequence[_RanTrial], b: Sequence[_RanTrial]) -> list[ArmDifference]:
    """arm_differences of two arms' trials (the first trial of each arm whose start was read).

    Empty when neither arm's start was read (trials stored before effective
    configs were recorded, or engine doubles): the requested difference is
    already in the report's configs, and there is no evidence to add.
    """
    if not a or not b:
        return []
    first_a = next((t for t in a if t.effective), a[0])
    first_b = next((t for t in b if t.effective), b[0])
    if not (first_a.effective or {}).get("values") and not (first_b.effective or {}).get("values"):
        return []
    return arm_differences(
        first_a.config.engine,
        of_trial(first_a.effective),
        first_b.config.engine,
        of_trial(first_b.effective),
    )
