"""Turn raw vendor-library values into numbers or None.

The libraries say "not available" in several ways: the string "N/A"
(amdsmi's Python layer), all-ones integers such as 0xFFFF or 0xFFFFFFFF
(amdsmi fields its Python layer forgets to check, NVML's
``NVML_VALUE_NOT_AVAILABLE``), or ``None``. These helpers fold all of them
into ``None`` so no sentinel ever reaches a table or an energy sum.
"""

from __future__ import annotations

from typing import Any

# All-ones values of the unsigned widths the C structs use.
SENTINELS: frozenset[int] = frozenset({0xFF_FF, 0xFF_FF_FF_FF, 0xFF_FF_FF_FF_FF_FF_FF_FF})

# Watts above this cannot be a GPU's power: such a field is in microwatts
# (amdsmi power caps are µW; newer amdsmi also reports power_limit in µW).
_MICROWATT_THRESHOLD = 100_000


def number(value: Any) -> float | None:
    """A finite number, or None for "N/A", sentinels, None, bools and junk."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or text.upper() == "N/A":
            return None
        try:
            value = float(text)
        except ValueError:
            return None
    if isinstance(value, int):
        return None if value in SENTINELS else float(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return value
    return None


def integer(value: Any) -> int | None:
    """Like :func:`number` but an int (for bytes and pids)."""
    num = number(value)
    return None if num is None else int(num)


def percent(value: Any) -> float | None:
    """A utilisation percent; values outside 0..100 are not real readings."""
    num = number(value)
    if num is None or num < 0 or num > 100:
        return None
    return num


def watts(value: Any) -> float | None:
    """Watts from a field that may be W or µW; zero is "not reported".

    A working GPU never draws exactly 0 W and never has a 0 W cap, so a
    zero here is an unsupported field, not a measurement.
    """
    num = number(value)
    if num is None or num <= 0:
        return None
    if num >= _MICROWATT_THRESHOLD:
        return num / 1_000_000
    return num


def celsius(value: Any) -> float | None:
    """A temperature in °C; 0 and implausible values are unsupported sensors.

    A powered GPU in a server is never at exactly 0 °C, and some sensors
    that do not exist read 0; readings above 200 °C are garbage.
    """
    num = number(value)
    if num is None or num <= 0 or num > 200:
        return None
    return num


def text(value: Any) -> str | None:
    """A non-empty string, or None for "N/A" and blanks (bytes are decoded)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if not isinstance(value, str):
        return None
    stripped = value.strip().strip("\x00").strip()
    if not stripped or stripped.upper() == "N/A":
        return None
    return stripped
