"""Notes an A/B's verdict carries about its GPUs: clean samples, per-GPU effects (issue 17).

Both read only the stored trials, so a stored A/B gives the same notes as the
run did; :func:`tuner.studies.ab.build_report` lays them beside the figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from tuner.studies.common import value_of
from tuner.trials.model import Trial


def sample_notes(arms: dict[str, list[Trial]]) -> list[str]:
    """``GPU samples clean: A 30/32, B 32/32; A: 2 with a foreign process`` (issue 17).

    Beside every verdict measured with GPU telemetry: how many of each arm's
    samples (over its trials' measured runs) had no foreign process on the
    trial's GPUs, no throttling and no power-cap hit, so a dirty sample never
    decides a verdict silently. Nothing when no trial was sampled.
    """
    counts: dict[str, tuple[int, int, dict[str, int]]] = {}
    for arm, trials in arms.items():
        total = clean = 0
        dirt: dict[str, int] = {}
        for t in trials:
            tel = t.telemetry or {}
            if not isinstance(tel.get("samples"), int):
                continue  # no GPU window (CPU engine), or stored before samples were judged
            total += tel["samples"]
            clean += int(tel.get("samples_clean") or 0)
            for why, n in (tel.get("dirt") or {}).items():
                dirt[why] = dirt.get(why, 0) + int(n)
        if total:
            counts[arm] = (clean, total, dirt)
    if not counts:
        return []
    text = "GPU samples clean: " + ", ".join(f"{a} {c}/{n}" for a, (c, n, _) in counts.items())
    spoiled = [
        f"{arm}: " + ", ".join(f"{n} {why}" for why, n in sorted(dirt.items()))
        for arm, (_, _, dirt) in counts.items()
        if dirt
    ]
    return [text + ("; " + "; ".join(spoiled) if spoiled else "")]


def gpu_effects(trials: Sequence[Trial], objective: str) -> list[str]:
    """Per-GPU deviation of the objective from its arm's geometric mean, when arms used several GPUs.

    With arms swapped between GPUs, a GPU that is slower for both arms shows
    as the same negative deviation in both: a node effect the swap cancels
    from the verdict, reported so the user can look at that GPU.
    """
    slots = {t.gpu_slot for t in trials if t.gpu_slot}
    if len(slots) < 2:
        return []
    centre: dict[str, float] = {}
    for arm in ("A", "B"):
        values = [v for t in trials if t.arm == arm and (v := value_of(t, objective))]
        if values and all(v > 0 for v in values):
            centre[arm] = statistics.fmean(math.log(v) for v in values)
    per_gpu: dict[str, list[float]] = {}
    for t in trials:
        v = value_of(t, objective)
        if t.gpu_slot and t.arm in centre and v and v > 0:
            per_gpu.setdefault(t.gpu_slot, []).append(math.log(v) - centre[t.arm])
    parts = [
        f"GPU {gpu} {math.exp(statistics.fmean(devs)) - 1.0:+.1%} (n={len(devs)})"
        for gpu, devs in sorted(per_gpu.items())
    ]
    return (
        [f"per-GPU effect on {objective} (vs the arm's mean): " + ", ".join(parts)] if parts else []
    )
