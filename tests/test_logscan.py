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
        # vLLM 0.10-0.18 ROCm wordings (platforms/rocm.py): human names, not enum names
        ("INFO [rocm.py:230] Using AITER MLA backend on V1 engine.", "ROCM_AITER_MLA"),
        ("INFO [rocm.py:230] Using AITER MLA backend.", "ROCM_AITER_MLA"),
        ("INFO [rocm.py:231] Using AITER TRITON MLA backend.", "ROCM_AITER_TRITON_MLA"),
        (
            "(EngineCore_DP0 pid=742) (RayWorkerWrapper pid=233, ip=10.20.1.125) INFO 11-12 "
            "11:12:01 [rocm.py:298] Using Rocm Attention backend on V1 engine.",
            "ROCM_ATTN",
        ),
        ("INFO [rocm.py:292] Using Rocm Attention backend.", "ROCM_ATTN"),
        ("INFO [rocm.py:260] Using ROCm Attention backend on V1 engine.", "ROCM_ATTN"),
        ("INFO [rocm.py:300] Using Aiter Flash Attention backend on V1 engine.", "ROCM_AITER_FA"),
        (
            "INFO [rocm.py:290] Using Aiter Unified Attention backend on V1 engine.",
            "ROCM_AITER_UNIFIED_ATTN",
        ),
        ("INFO [rocm.py:220] Using Sparse MLA backend on V1 engine.", "ROCM_AITER_MLA_SPARSE"),
        ("INFO [rocm.py:240] Using Triton MLA backend on V1 engine.", "TRITON_MLA"),
        ("INFO [rocm.py:280] Using FlexAttention backend.", "FLEX_ATTENTION"),
        # CUDA 0.8-0.11 wordings (platforms/cuda.py)
        ("INFO [cuda.py:284] Using Flash Attention backend on V1 engine.", "FLASH_ATTN"),
        ("INFO [cuda.py:311] Using FlashInfer backend on V1 engine.", "FLASHINFER"),
        ("INFO [cuda.py:250] Using FlashMLA backend on V1 engine.", "FLASHMLA"),
        ("INFO [cuda.py:250] Using Cutlass MLA backend on V1 engine.", "CUTLASS_MLA"),
        ("INFO [cuda.py:250] Using FlashInfer MLA backend on V1 engine.", "FLASHINFER_MLA"),
        ("INFO [cpu.py:60] Using Torch SDPA backend.", "TORCH_SDPA"),
        # 0.32 XPU wordings (platforms/xpu.py)
        ("INFO [xpu.py:192] Using Triton backend.", "TRITON_ATTN"),
        ("INFO [xpu.py:189] Using Flash Attention MLA backend on XPU.", "FLASH_ATTN_MLA"),
        ("INFO [xpu.py:158] Using XPU MLA Sparse backend.", "XPU_MLA_SPARSE"),
        # 0.32 ROCm selector override (platforms/rocm.py ~840): the override wins
        (
            "(EngineCore pid=5) INFO 11-23 08:00:00 [rocm.py:841] Found incompatible backend(s) "
            "[ROCM_AITER_FA] with AttentionType.DECODER. Overriding with ROCM_ATTN out of "
            "potential backends: ['ROCM_ATTN', 'TRITON_ATTN'].",
            "ROCM_ATTN",
        ),
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
    # Before the enum's rename (vLLM <= 0.10 cpu.py): "_Backend.TORCH_SDPA".
    assert logscan.rejected_backend("INFO Cannot use _Backend.TORCH_SDPA backend on CPU.") == (
        "TORCH_SDPA"
    )
    assert logscan.rejected_backend("INFO [cpu.py:175] Using CPU_MLA backend.") is None


def test_incompatible_backends_of_the_rocm_override() -> None:
    line = (
        "INFO [rocm.py:841] Found incompatible backend(s) [ROCM_AITER_FA, FLASH_ATTN] with "
        "AttentionType.DECODER. Overriding with ROCM_ATTN out of potential backends: ['ROCM_ATTN']."
    )
    assert logscan.incompatible_backends(line) == ["ROCM_AITER_FA", "FLASH_ATTN"]
    assert logscan.incompatible_backends("INFO Using ROCM_ATTN backend.") == []


def test_unknown_human_wording_is_not_turned_into_a_fake_name() -> None:
    assert logscan.backend_from_line("INFO Using Shiny New Attention backend.") is None


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


def test_a_refused_config_gives_vllms_sentence_not_the_pydantic_header() -> None:
    """Issue 27: vLLM 0.32 refusing max-num-batched-tokens below max-num-seqs at start.

    The log is the real CPU engine's (``--max-num-seqs 64 --max-num-batched-tokens 16``,
    paths shortened): the traceback ends with pydantic's "1 validation error for
    SchedulerConfig" header, and the sentence after it is what the user must read.
    """
    from pathlib import Path

    log = Path(__file__).parent / "data" / "vllm-logs" / "cpu-0.32-mbt-below-max-num-seqs.log"
    reason = logscan.failure_reason(log.read_text().splitlines(), 1)
    assert reason == (
        "vLLM refused the config (SchedulerConfig): max_num_batched_tokens (16) must be "
        "greater than or equal to max_num_seqs (64)."
    )


def test_a_pydantic_refusal_names_each_field() -> None:
    lines = [
        "pydantic_core._pydantic_core.ValidationError: 2 validation errors for CompilationConfig",
        "level",
        "  Extra inputs are not permitted [type=extra_forbidden, input_value=3, input_type=int]",
        "    For further information visit https://errors.pydantic.dev/2.14/v/extra_forbidden",
        "mode",
        "  Input should be 0, 1, 2 or 3 [type=enum, input_value=9, input_type=int]",
    ]
    assert logscan.failure_reason(lines, 1) == (
        "vLLM refused the config (CompilationConfig): level: Extra inputs are not permitted; "
        "mode: Input should be 0, 1, 2 or 3"
    )


def test_a_truncated_compile_cache_entry_is_named_with_its_fix() -> None:
    """Lines of a real failed start (vLLM 0.32 CPU engine, 2026-11-28): an earlier engine was
    SIGKILLed while inductor wrote a kernel, leaving a 0-byte .so every later start loaded."""
    so = "/tmp/torchinductor_root/xn/cxn7xgp4k53vytk5tjvu7jfiboamdahedltbzizgvtsu5rltvfea.main.so"
    lines = [
        "(EngineCore pid=22463) ERROR 11-28 22:38:59 [core.py:1510] RuntimeError: Worker failed "
        "with error 'backend='inductor' raised:",
        f"(EngineCore pid=22463) ERROR 11-28 22:38:59 [core.py:1510] ImportError: {so}: file too short",
        "(EngineCore pid=22463) ERROR 11-28 22:38:59 [core.py:1510] ', please check the stack "
        "trace above for the root cause",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore': 1}",
    ]
    said = logscan.failure_reason(lines, 1)
    assert so in said and f"rm {so}" in said and "truncated" in said
    assert logscan.known_cause(lines[:1] + lines[2:]) is None  # without the ImportError line
    assert "Engine core initialization failed" in logscan.failure_reason(lines[:1] + lines[2:], 1)
