"""Whether a GPU sample is clean enough to measure a trial by (issue 17, contamination).

A trial's numbers are only as good as the GPUs it ran on: another process on
the trial's GPU, a throttled clock or a GPU pinned at its power cap all slow
it down for reasons that are not its config. The sampler already reads every
GPU twice a second; this module says, per sample, what (if anything) was
wrong, so the window over a measured run can say "n of m samples clean" and
an A/B never lets a dirty sample decide silently. "Foreign" is relative to
the caller's own processes (the engines this tunelab runs): the telemetry
layer knows GPUs, not engines.
"""

from __future__ import annotations

from tuner.telemetry.types import GpuProcess, GpuSnapshot

# Power at or above this share of the cap counts as pinned at the cap.
AT_CAP = 0.98

FOREIGN = "foreign process"
THROTTLED = "throttled"
AT_POWER_CAP = "at power cap"


def foreign(
    processes: tuple[GpuProcess, ...] | None, own: set[int]
) -> tuple[GpuProcess, ...] | None:
    """The processes on a GPU that are not in ``own`` (this tunelab's engines' pids).

    None when the GPU's process list is not readable (another user's processes
    are often hidden from a non-root user): unknown, not "nobody".
    """
    if processes is None:
        return None
    return tuple(p for p in processes if p.pid not in own)


def dirt(snap: GpuSnapshot, own: set[int] | None) -> tuple[str, ...]:
    """What makes the sample unfit to measure by; empty when it is clean.

    Args:
        snap: One GPU's sample.
        own: The pids that belong to the measurement (its engine's tree); None
            when the caller cannot tell, and then processes are not judged.
    """
    why: list[str] = []
    if own is not None and foreign(snap.processes, own):
        why.append(FOREIGN)
    if snap.throttle not in (None, "none"):
        why.append(THROTTLED)
    if snap.power_w is not None and snap.power_cap_w and snap.power_w >= AT_CAP * snap.power_cap_w:
        why.append(AT_POWER_CAP)
    return tuple(why)
