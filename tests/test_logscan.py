"""Backend and failure parsing across the wordings of different vLLM versions."""

from __future__ import annotations

import pytest

from tuner.engine import logscan


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # vLLM 0.6-0.8 (V0/V1 CUDA)
        ("INFO 05-01 10:00:00 [cuda.py:240] Using Flash Attention backend.", "FLASH_ATTN"),
        (
            "(EngineCore_0 pid=12) INFO 09-01 10:00:00 [cuda.py:446] Using FLASH_ATTN backend.",
            "FLASH_ATTN",
        ),
        ("INFO [rocm.py:200] Using Triton Attention backend on V1 engine.", "TRITON_ATTN"),
        (
            "(Worker pid=9) INFO 11-02 01:02:03 [rocm.py:850] Using ROCM_AITER_FA backend out of potential backends: ['ROCM_AITER_FA', 'TRITON_ATTN'].",
            "ROCM_AITER_FA",
        ),
        (
            "INFO [rocm.py:750] Using ROCM_AITER_UNIFIED_ATTN backend (selected via --attention-backend).",
            "ROCM_AITER_UNIFIED_ATTN",
        ),
        (
            "INFO [cuda.py:507] Using TRITON_ATTN attention backend out of potential backends: ['X'].",
            "TRITON_ATTN",
        ),
        ("INFO [cpu.py:175] Using CPU_MLA backend.", "CPU_MLA"),
        ("INFO [selector.py:1] Using the ROCmFlashAttention backend.", "ROCM_FLASH"),
    ],
)
def test_backend_lines_of_several_versions(line: str, expected: str) -> None:
    assert logscan.backend_from_line(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "INFO [unquantized.py:529] Using TritonExperts MoE backend",
        "INFO [selector.py:106] Using FLASH_ATTN MLA prefill backend.",
        "INFO [rocm.py:878] Using backend TORCH_SDPA for vit attention",
        "INFO [compilation.py:1123] Using OOT custom backend for compilation.",
        "INFO [base.py:123] Using Transformers modeling backend.",
        "INFO [model.py:2152] Using max model len 2048",
        "INFO [parallel_state.py:1906] world_size=1 rank=0 backend=gloo",
    ],
)
def test_non_attention_backend_lines_are_ignored(line: str) -> None:
    assert logscan.backend_from_line(line) is None


def test_rejected_backend_is_reported() -> None:
    line = "(Worker pid=3) INFO 11-22 01:00:00 [cpu.py:178] Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU."
    assert logscan.rejected_backend(line) == "FLASH_ATTN"


def test_failure_reason_picks_the_error_not_the_traceback() -> None:
    lines = [
        "(APIServer pid=1) INFO 11-22 01:00:00 [model.py:1] Using max model len 2048",
        "Traceback (most recent call last):",
        '  File "/x/registry.py", line 28, in __getitem__',
        "    raise ValueError(",
        "ValueError: Unknown attention backend: 'FOO'. Valid options are: FLASH_ATTN, CPU_ATTN",
    ]
    assert logscan.failure_reason(lines, 1).startswith(
        "ValueError: Unknown attention backend: 'FOO'"
    )


def test_failure_reason_strips_worker_prefixes() -> None:
    lines = [
        "(Worker pid=7448) ERROR 11-22 01:53:27 [multiproc_executor.py:1063] ValueError: Available "
        "memory on node 0 (6.66/8.21 GiB) on kv cache allocation is less than requested memory",
        "(EngineCore pid=7326) ERROR 11-22 01:53:27 [core.py:1510] EngineCore failed to start.",
    ]
    reason = logscan.failure_reason(lines, 1)
    assert reason.startswith("ValueError: Available memory on node 0")


def test_failure_reason_without_error_line_names_signal_or_code() -> None:
    assert "signal 9" in logscan.failure_reason(["INFO started"], -9)
    assert "code 3" in logscan.failure_reason(["INFO all fine"], 3)
    assert "before writing any log" in logscan.failure_reason([], 1)


def test_argparse_error_is_a_reason() -> None:
    lines = [
        "usage: api_server.py [-h] ...",
        "api_server.py: error: argument --max-num-seqs: invalid int value: 'x'",
    ]
    assert "invalid int value" in logscan.failure_reason(lines, 2)


def test_port_in_use_detection() -> None:
    assert logscan.port_in_use(["OSError: [Errno 98] Address already in use"])
    assert not logscan.port_in_use(["ValueError: nope"])
