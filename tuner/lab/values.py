"""How typed text becomes a value: one parser per kind, used by the CLI and the TUI alike.

Before this module the CLI accepted ``infinity`` as a request rate and the TUI
did not, and the TUI read booleans with its own word list; now both faces call
these functions.
"""

from __future__ import annotations

import math
from typing import Any

from tuner.config import EngineValue
from tuner.errors import TunelabError
from tuner.knobs import coerce
from tuner.switches import switch_state

INFINITE_WORDS = frozenset({"inf", "infinity", "+inf"})


class ValueTextError(TunelabError, ValueError):
    """Text that is not a value of the asked kind; the message says what would be."""


def parse_bool(value: Any) -> bool:
    """A switch's state from a typed value (bool, 0/1, or one of the words above).

    Raises:
        ValueTextError: for text that is neither a true nor a false word.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    state = switch_state(str(value))
    if state is not None:
        return state
    raise ValueTextError(f"{value!r} is not on/off: give true or false (1/0, yes/no, on/off)")


def parse_rate(text: str) -> float:
    """Arrivals per second: a positive number, or inf/infinity (all at once); empty = inf.

    Raises:
        ValueTextError: saying what a rate looks like (the caller names the field).
    """
    low = text.strip().lower()
    if not low or low in INFINITE_WORDS:
        return math.inf
    try:
        rate = float(low)
    except ValueError:
        raise ValueTextError(
            f"{text.strip()!r} is not a number; give requests per second (e.g. 4.0) or inf"
        ) from None
    if math.isnan(rate) or rate <= 0:
        raise ValueTextError(f"{text.strip()!r} is not above 0 requests per second (nor inf)")
    return rate


def parse_fraction(text: str) -> float:
    """A share strictly between 0 and 1 from ``2%`` or ``0.02`` (A/B margins, tolerances).

    Raises:
        ValueTextError: Not a number or a percentage, or not between 0 % and 100 %.
    """
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueTextError(f"takes a percentage such as 2%, not {text!r}") from None
    if not 0.0 < value < 1.0:
        raise ValueTextError(f"must be between 0% and 100%, got {text!r}")
    return value


def rate_text(rate: float) -> str:
    """The text :func:`parse_rate` reads back as ``rate``."""
    return "inf" if math.isinf(rate) else f"{rate:g}"


def knob_value(key: str, text: str) -> EngineValue:
    """A knob's typed value from its text (the catalogue's coercer; ConfigError when invalid)."""
    return coerce(key, text)  # type: ignore[no-any-return]
