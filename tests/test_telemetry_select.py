"""Backend selection: silent, ordered, and honest about why there is no GPU.

The first tests use the REAL ``amdsmi`` and ``nvidia-ml-py`` packages (dev
extra) on a machine without their native libraries — the situation of every
development box and CI runner.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fakes import fake_amdsmi, fake_pynvml
from tuner.telemetry import select as sel
from tuner.telemetry.amd import AmdSmiBackend, load_amdsmi
from tuner.telemetry.base import BackendUnavailable, NoneBackend
from tuner.telemetry.nvidia import NvmlBackend

HAVE_REAL_AMDSMI = importlib.util.find_spec("amdsmi") is not None
HAVE_REAL_PYNVML = importlib.util.find_spec("pynvml") is not None
NO_NATIVE = not any(
    Path(p).exists() for p in ("/opt/rocm/lib/libamd_smi.so", "/dev/kfd", "/dev/nvidiactl")
)


@pytest.mark.skipif(not (HAVE_REAL_AMDSMI and HAVE_REAL_PYNVML), reason="needs the dev extra")
@pytest.mark.skipif(not NO_NATIVE, reason="a GPU stack is installed here")
def test_real_packages_without_native_libs_select_none_silently(
    capfd: pytest.CaptureFixture[str],
) -> None:
    backend = sel.select_backend("auto")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert isinstance(backend, NoneBackend)
    assert backend.count() == 0
    assert backend.reasons == (
        "amdsmi: libamd_smi.so not found (install ROCm's amd-smi-lib, or set ROCM_PATH)",
        "NVML: libnvidia-ml.so.1 not found (no NVIDIA driver installed)",
    )
    assert "libamd_smi.so not found" in backend.description
    assert "amdsmi" not in sys.modules  # the failed import left nothing half-loaded


@pytest.mark.skipif(not HAVE_REAL_AMDSMI, reason="needs the dev extra")
@pytest.mark.skipif(not NO_NATIVE, reason="a GPU stack is installed here")
def test_real_amdsmi_import_prints_nothing_and_explains(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BackendUnavailable, match=r"^amdsmi: libamd_smi\.so not found"):
        load_amdsmi()
    assert capfd.readouterr() == ("", "")
    forced = sel.select_backend("amd")
    assert capfd.readouterr() == ("", "")
    assert isinstance(forced, NoneBackend)
    assert len(forced.reasons) == 1 and forced.reasons[0].startswith("amdsmi:")


def test_native_writes_to_fds_are_silenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # An 'amdsmi' that writes straight to fds 1 and 2 (as C code would) and then
    # fails the way the real one does without its library.
    pkg = tmp_path / "amdsmi"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            import os
            os.write(1, b"native stdout noise\\n")
            os.write(2, b"native stderr noise\\n")
            print("Unable to find libamd_smi.so library")
            raise KeyError("libamd_smi.so")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    with pytest.raises(BackendUnavailable, match=r"libamd_smi\.so not found"):
        load_amdsmi()
    assert capfd.readouterr() == ("", "")
    print("after")  # the fds work again afterwards
    assert capfd.readouterr().out == "after\n"


def test_missing_python_package_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # makes 'import amdsmi' fail
    monkeypatch.setitem(sys.modules, "pynvml", None)
    backend = sel.select_backend("auto")
    assert backend.reasons == (
        "amdsmi: Python package not installed (pip install amdsmi)",
        "NVML: Python package not installed (pip install nvidia-ml-py)",
    )


def test_auto_prefers_amd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        sel.FACTORIES, "amd", lambda: AmdSmiBackend(fake_amdsmi.make_module("mi300x"))
    )
    monkeypatch.setitem(sel.FACTORIES, "nvidia", lambda: NvmlBackend(fake_pynvml.make_module()))
    backend = sel.select_backend("auto")
    try:
        assert backend.name == "amd" and backend.count() == 8
    finally:
        backend.close()


def test_auto_falls_back_to_nvidia_with_amd_module_on_sys_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real import path: a fake amdsmi that has no GPUs, a fake pynvml that has eight.
    amd = fake_amdsmi.make_module("mi300x")
    amd.amdsmi_get_processor_handles = lambda: []
    monkeypatch.setitem(sys.modules, "amdsmi", amd)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.make_module())
    backend = sel.select_backend("auto")
    try:
        assert backend.name == "nvidia" and backend.count() == 8
        assert amd.shutdown_count == 1  # the AMD attempt was cleaned up
    finally:
        backend.close()


def test_none_and_unknown_choices() -> None:
    assert sel.select_backend("none").reasons == ("telemetry disabled (--backend none)",)
    with pytest.raises(ValueError, match="choose one of: auto, amd, nvidia, none"):
        sel.select_backend("intel")


def test_unexpected_backend_bug_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> AmdSmiBackend:
        raise RuntimeError("boom")

    monkeypatch.setitem(sel.FACTORIES, "amd", broken)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    backend = sel.select_backend("auto")
    assert backend.reasons[0] == "amd: unexpected RuntimeError: boom"
