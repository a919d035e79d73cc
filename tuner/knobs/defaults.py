"""vLLM's own defaults that depend on the release and the device: batch sizes, memory share.

vLLM does not have one default ``--max-num-batched-tokens``: ``EngineArgs.get_batch_defaults``
picks it (and ``--max-num-seqs``) from the device's memory when the user sets
neither. A rule that assumed one number (8192) was wrong on half the machines
people serve on, so the tiers are kept here, by release, for planning targets;
a test compares them with the installed vLLM's own answer.

Sources (vllm-project/vllm ``vllm/engine/arg_utils.py`` ``get_batch_defaults``):

* 0.32.0 (installed in .venv, lines 2894-2985): ``device_memory >= 160 GiB`` →
  16384 tokens / 1024 seqs for both the API server and the LLM class;
  ``>= 70 GiB`` and not an A100 → API server 8192 tokens, LLM class 16384,
  1024 seqs; otherwise API server 2048 tokens, LLM class 8192, 256 seqs.
  CPU: API server 2048 × world size tokens and 128 × world size seqs.
* The ≥ 160 GiB tier ("for GPUs like B200/B300 with >= 160GB memory") first
  appears at tag v0.28.0 (arg_utils.py lines 2582-2591); v0.27.0 tops out at
  the ≥ 70 GiB tier (lines 2544-2549). The A100 exclusion is PR #17885.
* ``--gpu-memory-utilization``: 0.9 up to 0.31, 0.92 from 0.32.0
  (``vllm/config/cache.py`` line 102 in the installed 0.32.0; the catalogue's
  ``default_by_version`` for the knob).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.knobs.versions import parse_version

LARGE_TIER_SINCE = "0.28.0"
UTILIZATION_092_SINCE = "0.32.0"
_LARGE_GIB = 160
_MID_GIB = 70


@dataclass(frozen=True)
class BatchDefaults:
    """What vLLM serves with when the user sets neither batch knob (``vllm serve``).

    Attributes:
        max_num_batched_tokens: Tokens per scheduler step (MBT).
        max_num_seqs: Sequences per step.
        tier: Which device tier gave them, for messages ("≥160 GiB", "≥70 GiB", "<70 GiB", "cpu").
    """

    max_num_batched_tokens: int
    max_num_seqs: int
    tier: str = ""


def _at_least(version: str | None, since: str) -> bool:
    """``version`` ≥ ``since``; an unknown version counts as current (the newest rules)."""
    if not version:
        return True
    try:
        return parse_version(version) >= parse_version(since)
    except ValueError:
        return True


def batch_defaults(
    vllm_version: str,
    platform: str,
    device_gib: float | None,
    *,
    world_size: int = 1,
    device_name: str | None = None,
) -> BatchDefaults:
    """The API server's default MBT and max-num-seqs for this release on this device.

    Args:
        vllm_version: Target vLLM release ("0.32.0"); an unparsable one counts as current.
        platform: "rocm", "cuda" or "cpu".
        device_gib: Memory of one GPU in GiB; None when unknown (vLLM then also
            falls back to its smallest tier: it reads 0 bytes).
        world_size: Engine ranks; only the CPU defaults scale with it.
        device_name: The GPU's name where known (an A100 never gets the ≥70 GiB tier).
    """
    if (platform or "").lower() == "cpu":
        world = max(world_size, 1)
        return BatchDefaults(2048 * world, 128 * world, "cpu")
    gib = device_gib or 0.0
    if gib >= _LARGE_GIB and _at_least(vllm_version, LARGE_TIER_SINCE):
        return BatchDefaults(16384, 1024, "≥160 GiB")
    if gib >= _MID_GIB and "a100" not in (device_name or "").lower():
        # vLLM excludes devices whose name contains "a100" (PR #17885: a large
        # MBT lowered A100 throughput).
        return BatchDefaults(8192, 1024, "≥70 GiB")
    return BatchDefaults(2048, 256, "<70 GiB")


def gpu_memory_utilization_default(vllm_version: str | None) -> float:
    """vLLM's ``--gpu-memory-utilization`` default for a release (0.92 from 0.32.0)."""
    return 0.92 if _at_least(vllm_version, UTILIZATION_092_SINCE) else 0.9
