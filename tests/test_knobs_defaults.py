"""vLLM's batch and memory defaults by release and device (tuner.knobs.defaults)."""

from __future__ import annotations

import pytest

from tuner.knobs.defaults import BatchDefaults, batch_defaults, gpu_memory_utilization_default


@pytest.mark.parametrize(
    ("version", "platform", "gib", "expected"),
    [
        # vllm/engine/arg_utils.py get_batch_defaults, installed 0.32.0 lines 2923-2952
        ("0.32.0", "rocm", 192.0, (16384, 1024)),  # MI300X: >= 160 GiB tier
        ("0.32.0", "cuda", 79.2, (8192, 1024)),  # H100: >= 70 GiB tier
        ("0.32.0", "cuda", 44.5, (2048, 256)),  # L40S: below 70 GiB
        ("0.32.0", "rocm", 24.0, (2048, 256)),  # MI300X CPX partition
        ("0.27.0", "rocm", 192.0, (8192, 1024)),  # no >= 160 GiB tier before 0.28.0
        ("0.28.0", "cuda", 178.0, (16384, 1024)),
        ("0.32.0", "cuda", None, (2048, 256)),  # unknown memory: vLLM reads 0 bytes
    ],
)
def test_batch_defaults_by_version_and_device(version, platform, gib, expected):
    got = batch_defaults(version, platform, gib)
    assert isinstance(got, BatchDefaults)
    assert (got.max_num_batched_tokens, got.max_num_seqs) == expected


def test_batch_defaults_cpu_scale_with_world_size():
    assert batch_defaults("0.32.0", "cpu", None, world_size=2).max_num_batched_tokens == 4096
    assert batch_defaults("0.32.0", "cpu", None).max_num_seqs == 128


def test_a100_never_gets_the_mid_tier():
    got = batch_defaults("0.32.0", "cuda", 79.2, device_name="NVIDIA A100-SXM4-80GB")
    assert got.max_num_batched_tokens == 2048


def test_utilization_default_moved_to_092_in_032():
    assert gpu_memory_utilization_default("0.31.0") == 0.9
    assert gpu_memory_utilization_default("0.32.0") == 0.92
    assert gpu_memory_utilization_default(None) == 0.92
