"""How the study commands read ``--slo`` and percentages: text in, typed values out.

``--slo`` takes two forms: ``METRIC<=VALUE`` (a constraint on a result key,
read by tuner.lab.plan_input, as the TUI reads it) and ``KEY:MS`` (a goodput objective of the
workload, parsed with the other workload options by tuner.lab.workload).
Bad text ends the command with status 2 and one line saying what to write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.cli import options as opt
from tuner.errors import TunelabError
from tuner.lab import plan_input
from tuner.lab.values import ValueTextError
from tuner.lab.values import parse_fraction as parse

if TYPE_CHECKING:
    from tuner.lab.plan_input import Constraint


def split_slo(command: str, items: list[str] | None) -> tuple[list[Constraint], str | None]:
    """Separates METRIC<=VALUE constraints from KEY:MS goodput SLOs (joined for make_workload)."""
    constraints: list[Constraint] = []
    goodput: list[str] = []
    for item in items or []:
        if any(op in item for op in ("<", ">")):
            try:
                constraints.append(plan_input.constraint(item))
            except TunelabError as exc:  # bad syntax, an unknown metric, a non-finite bound
                raise opt.user_error(command, exc) from None
        elif ":" in item:
            goodput.append(item)
        else:
            raise opt.usage_error(
                command,
                f"--slo {item!r}: write METRIC<=VALUE (e.g. p99_ttft_ms<=500) or KEY:MS (e.g. ttft:500)",
            )
    return constraints, ",".join(goodput) or None


def parse_fraction(command: str, option: str, text: str | None) -> float | None:
    """``2%`` or ``0.02`` → 0.02 (tuner.lab.values.parse_fraction); a usage error names the option."""
    if text is None:
        return None

    try:
        return parse(text)
    except ValueTextError as exc:
        raise opt.usage_error(command, f"{option} {exc}") from None
