"""What a study may vary and what it must respect: parameters, spaces and SLO constraints.

A search space is declared as data — ``--param KEY=V1,V2,...`` on the command
line or a TOML/JSON file — and parsed here once, so the sweep, the search and
the CLI all agree on what ``max-num-seqs=int:8..256`` means. Knob values go
through the catalogue's coercion when it knows the key, so ``--param
VLLM_ROCM_USE_AITER=0,1`` yields the same typed values ``--set`` would.
SLO constraints (``p99_ttft_ms<=500``) are result-key bounds checked against a
trial's benchmark results; a missing metric never counts as meeting an SLO.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tuner.bounded import InputTooLargeError, loads, read_text
from tuner.config import ConfigError, EngineValue, parse_value
from tuner.errors import TunelabError
from tuner.knobs import coerce as knob_coerce
from tuner.knobs import get

ParamKind = Literal["categorical", "int", "float"]

# Workload fields a sweep may vary without restarting the engine.
WORKLOAD_KEYS = frozenset(
    {"concurrency", "request_rate", "input_len", "output_len", "num_prompts", "burstiness"}
)

_RANGE_RE = re.compile(r"^(int|float):\s*(.+?)\s*\.\.\s*(.+?)\s*(?::(log))?$")
_CONSTRAINT_RE = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


class SpaceError(TunelabError, ValueError):
    """A parameter, space file or constraint that cannot be used; says how to write it."""


def coerce(key: str, text: str) -> EngineValue | None:
    """A typed value for ``key`` from text: the catalogue's coercion when it knows the key."""
    if key in WORKLOAD_KEYS:
        value = parse_value(text)
        if isinstance(value, str) and value.lower() in {"inf", "none"}:
            return math.inf if value.lower() == "inf" else "none"
        return value

    if get(key) is not None:
        try:
            # The catalogue's typed value (a JSON knob's ``null`` is None).
            typed: EngineValue | None = knob_coerce(key, text)
        except ConfigError as exc:
            raise SpaceError(f"{key}={text!r}: {exc}") from None
        return typed
    return parse_value(text)


@dataclass(frozen=True)
class Param:
    """One dimension of a search space.

    Attributes:
        key: Knob key (env var name or engine flag without dashes) or workload field.
        kind: categorical (listed values), int or float (a range).
        choices: The values of a categorical parameter, typed.
        low: Lower bound of a range (inclusive).
        high: Upper bound of a range (inclusive).
        log: Sample the range on a log scale (sizes such as batched tokens).
    """

    key: str
    kind: ParamKind
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    log: bool = False

    def __post_init__(self) -> None:
        if self.kind == "categorical":
            if not self.choices:
                raise SpaceError(f"parameter {self.key} lists no values; write KEY=V1,V2,...")
            for value in self.choices:
                if not (value is None or isinstance(value, bool | int | float | str)):
                    raise SpaceError(
                        f"parameter {self.key}: value {value!r} is not a number, bool or "
                        "string; tables (e.g. compilation-config) cannot be searched over"
                    )
        else:
            if self.low is None or self.high is None or not self.low <= self.high:
                raise SpaceError(
                    f"parameter {self.key}: range {self.low}..{self.high} is empty; "
                    f"write {self.key}={self.kind}:LO..HI with LO <= HI"
                )
            if self.log and self.low <= 0:
                raise SpaceError(f"parameter {self.key}: a log range needs LO > 0, got {self.low}")

    @property
    def is_workload(self) -> bool:
        """True when the parameter changes the load, not the engine."""
        return self.key in WORKLOAD_KEYS

    def values(self) -> list[Any]:
        """Every value of a categorical parameter or an int range (for sweeps)."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int" and self.low is not None and self.high is not None:
            count = int(self.high) - int(self.low) + 1
            if count > 64:
                raise SpaceError(
                    f"parameter {self.key} spans {count} integers; a sweep needs listed "
                    f"values: write {self.key}=V1,V2,..."
                )
            return list(range(int(self.low), int(self.high) + 1))
        raise SpaceError(f"parameter {self.key} is a float range; a sweep needs listed values")

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "categorical":
            return {"key": self.key, "kind": self.kind, "choices": list(self.choices)}
        return {
            "key": self.key,
            "kind": self.kind,
            "low": self.low,
            "high": self.high,
            "log": self.log,
        }


def parse_param(text: str) -> Param:
    """Parse ``KEY=V1,V2,...``, ``KEY=int:LO..HI[:log]`` or ``KEY=float:LO..HI[:log]``.

    Raises:
        SpaceError: The text is not one of those shapes or a value does not fit its knob.
    """
    if "=" not in text:
        raise SpaceError(
            f"parameter {text!r} has no '='; write KEY=V1,V2,... or KEY=int:LO..HI "
            "(e.g. max-num-seqs=32,64,128)"
        )
    key, spec = (part.strip() for part in text.split("=", 1))
    key = key.removeprefix("--")
    if not key or not spec:
        raise SpaceError(f"parameter {text!r} needs both a key and values: KEY=V1,V2,...")
    match = _RANGE_RE.match(spec)
    if match:
        kind, lo, hi, log = match.groups()
        try:
            low = int(lo) if kind == "int" else float(lo)
            high = int(hi) if kind == "int" else float(hi)
        except ValueError:
            raise SpaceError(
                f"parameter {key}: {spec!r} is not a {kind} range; write {kind}:LO..HI"
            ) from None
        return Param(key, kind, low=low, high=high, log=bool(log))  # type: ignore[arg-type]
    if spec.startswith(("int:", "float:")):
        raise SpaceError(
            f"parameter {key}: {spec!r} is not a range; write int:LO..HI or float:LO..HI"
        )
    choices = tuple(coerce(key, item.strip()) for item in spec.split(",") if item.strip())
    if len(set(map(repr, choices))) != len(choices):
        raise SpaceError(f"parameter {key} lists a value twice: {spec}")
    return Param(key, "categorical", choices=choices)


def _param_from_data(key: str, value: Any) -> Param:
    if isinstance(value, list):
        return Param(key, "categorical", choices=tuple(value))
    if isinstance(value, dict):
        kind = value.get("type", "categorical")
        if kind == "categorical":
            return Param(key, "categorical", choices=tuple(value.get("values", ())))
        if kind in ("int", "float"):
            return Param(
                key,
                kind,
                low=value.get("low"),
                high=value.get("high"),
                log=bool(value.get("log", False)),
            )
        raise SpaceError(f"parameter {key}: type {kind!r} unknown; use categorical, int or float")
    if isinstance(value, str):
        return parse_param(f"{key}={value}")
    raise SpaceError(
        f"parameter {key}: write a list of values, a string like 'int:8..256', or a table "
        "{ type = 'int', low = 8, high = 256 }"
    )


@dataclass(frozen=True)
class Constraint:
    """An SLO bound on one result key, e.g. ``p99_ttft_ms <= 500``."""

    metric: str
    op: Literal["<=", ">=", "<", ">"]
    bound: float

    def violation(self, value: float | None) -> float:
        """How far ``value`` is beyond the bound (<= 0: met), Optuna's constraint convention.

        A missing value is a violation of 1e30: a trial without the metric
        cannot prove it meets the SLO.
        """
        if value is None or math.isnan(value):
            return 1e30
        gap = value - self.bound if self.op in ("<=", "<") else self.bound - value
        if self.op in ("<", ">") and gap == 0:
            return 1e-12
        return gap

    def met(self, value: float | None) -> bool:
        return self.violation(value) <= 0

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    """Parse ``METRIC<=VALUE`` (or >=, <, >), e.g. ``p99_ttft_ms<=500``.

    Raises:
        SpaceError: The text has another shape.
    """
    match = _CONSTRAINT_RE.match(text.strip().lower())
    if not match:
        raise SpaceError(
            f"SLO {text!r} is not METRIC<=VALUE; write e.g. p99_ttft_ms<=500 or "
            "output_throughput>=1000 (result keys as in `tunelab show --json`)"
        )
    metric, op, bound = match.groups()
    try:
        value = float(bound)
    except ValueError:
        raise SpaceError(f"SLO {text!r}: {bound!r} is not a number") from None
    return Constraint(metric, op, value)  # type: ignore[arg-type]


@dataclass
class Space:
    """A declared search space with its SLO constraints and fixed values.

    Attributes:
        params: The varied dimensions, in declaration order.
        constraints: SLO bounds every counted trial must meet.
        fixed: Knob values applied to every point (before the params).
    """

    params: list[Param] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        keys = [p.key for p in self.params]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise SpaceError(f"parameter(s) declared twice: {', '.join(dupes)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": [p.to_dict() for p in self.params],
            "constraints": [str(c) for c in self.constraints],
            "fixed": dict(self.fixed),
        }


MAX_SPACE_BYTES = 1024 * 1024  # a space names a few knobs: kilobytes


def load_space(path: Path) -> Space:
    """Read a space from TOML or JSON.

    The file holds ``[params]`` (each key: a list of values, ``"int:LO..HI"``,
    or a table with type/low/high/log), optional ``slo = ["p99_ttft_ms<=500"]``
    and optional ``[fixed]`` knob values.

    Raises:
        SpaceError: The file is missing, unparseable, or declares nothing to vary.
    """
    if not path.is_file():
        raise SpaceError(f"space file {path} does not exist")
    try:
        text = read_text(path, max_bytes=MAX_SPACE_BYTES, what="space file")
        data = (
            loads(text, what="space file")
            if path.suffix.lower() == ".json"
            else tomllib.loads(text)
        )
    except InputTooLargeError as exc:
        raise SpaceError(exc.message, fix=exc.fix) from None
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise SpaceError(f"cannot read space file {path}: {exc}") from None
    except RecursionError:
        raise SpaceError(
            f"space file {path} nests tables or arrays too deeply; a space needs two levels"
        ) from None
    unknown = set(data) - {"params", "slo", "fixed"}
    if unknown:
        raise SpaceError(
            f"space file {path}: unknown section(s) {', '.join(sorted(unknown))}; use params, slo, fixed"
        )
    params = data.get("params") or {}
    if not isinstance(params, dict) or not params:
        raise SpaceError(
            f"space file {path} declares no [params]; add e.g. max-num-seqs = [32, 64]"
        )
    slo = data.get("slo", [])
    if isinstance(slo, str):
        slo = [slo]
    return Space(
        params=[_param_from_data(k, v) for k, v in params.items()],
        constraints=[parse_constraint(s) for s in slo],
        fixed=dict(data.get("fixed") or {}),
    )
