"""The sane maxima of a study's counts and times, declared once for every face.

A study plans its trials up front (A/B rounds, sweep points, capacity probes,
Optuna trials) and each one is an engine launch of a minute or more, so a
typo such as ``--repeats 1000000000`` would either exhaust memory while the
plan is built or keep a node busy for centuries. The CLI's options
(tuner.cli.study_options, tuner.cli.capacity, ``presets verify``), the TUI's
job spec (tuner.lab.job_spec) and the capacity plan (tuner.lab.capacity)
take their bounds from here, so each bound is written in one place and every
refusal names the option, the value and the limit. The workload's own bounds
(lengths, prompts, rates) live with the workload, in tuner.bench.workload.
"""

from __future__ import annotations

import math

from tuner.errors import TunelabError

MAX_REPEATS = 100  # launches per A/B arm, sweep point, ablation arm or verify run
MAX_LAUNCHES = 100  # capacity: engine launches per arm
MAX_PROBES = 100  # capacity: measured loads per launch (a bisection needs ~10)
MAX_TRIALS = 10_000  # tune: points of one run (each is an engine launch)
MAX_STARTUP_TIMEOUT_S = 24 * 3600.0  # an engine that is not up in a day will not come up


class StudyLimitError(TunelabError, ValueError):
    """A study count or time outside what tunelab runs; names the option and its range."""


def check_count(option: str, value: object, least: int, most: int) -> int:
    """``value`` as a whole number in ``least..most``.

    Args:
        option: How the user named it (``--repeats``, or ``repeats`` in a job spec).
        value: What was given (any JSON value, for specs).
        least: The smallest allowed.
        most: The largest allowed (one of this module's maxima).

    Raises:
        StudyLimitError: Not a whole number, or outside the range.
    """
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StudyLimitError(
            f"{option} must be a whole number, got {value!r}",
            fix=f"give {option} a whole number from {least} to {most}",
        )
    if not least <= value <= most:
        raise StudyLimitError(
            f"{option} {value} is outside {least}..{most}",
            fix=f"give {option} a whole number from {least} to {most}",
        )
    return value


def check_seconds(option: str, value: object, least: float, most: float) -> float:
    """``value`` as a finite number of seconds in ``least..most`` (NaN and inf refused).

    Raises:
        StudyLimitError: Not a number, not finite, or outside the range.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        # An int is finite however large (math.isfinite would overflow on it).
        finite = isinstance(value, int) or math.isfinite(value)
        if finite and least <= value <= most:
            return float(value)
    raise StudyLimitError(
        f"{option} must be {least:g} to {most:g} seconds, got {value!r}",
        fix=f"give {option} a number of seconds from {least:g} to {most:g}",
    )
