"""The shape of one tunable: data only, so the catalogue is a table, not code.

A Knob says what a flag or environment variable is, where it applies and in
which vLLM versions it exists. The catalogue (``tuner.knobs.catalogue``)
holds the instances; rules, the TUI and export all read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tuner.knobs.references import cite


class KnobKind(StrEnum):
    """How the knob reaches vLLM."""

    ENV = "env"  # an environment variable
    ENGINE = "engine"  # an argument of `vllm serve`


class Platform(StrEnum):
    """Where a knob has an effect."""

    ROCM = "rocm"
    CUDA = "cuda"
    CPU = "cpu"
    ANY = "any"


class ValueType(StrEnum):
    """The type of a knob's value (drives parsing of KEY=VALUE and TUI widgets)."""

    BOOL = "bool"  # env: "0"/"1"; engine: --flag / --no-flag
    INT = "int"
    FLOAT = "float"
    STR = "str"
    CHOICE = "choice"
    JSON = "json"


@dataclass(frozen=True)
class Knob:
    """One tunable, as data.

    Attributes:
        key: The catalogue key: the env var name or the vLLM flag without dashes.
        kind: Environment variable or engine argument.
        type: Value type.
        group: TUI group (aiter, attention, batching, cudagraph, quantization,
            memory, parallelism, environment).
        help: One line a user understands.
        default: vLLM's default (None where it has none or it depends on the model).
        choices: Allowed values for CHOICE knobs (the catalogue's view; the
            installed vLLM's introspection wins where they differ).
        minimum: Lower bound for numbers, inclusive.
        maximum: Upper bound for numbers, inclusive.
        platforms: Where it has an effect.
        since: First vLLM version that has it ("0.10.0"), None if older than we track.
        until: First vLLM version that no longer has it, None if still present.
        replacement: What to use instead once removed.
        source: Reference it comes from: "file name §section".
    """

    key: str
    kind: KnobKind
    type: ValueType
    group: str
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    platforms: tuple[Platform, ...] = (Platform.ANY,)
    since: str | None = None
    until: str | None = None
    replacement: str | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def cited_source(self) -> str:
        """The source as a user reads it: the document's title, not its file name."""
        return cite(self.source)
