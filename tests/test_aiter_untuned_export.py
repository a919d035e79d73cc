"""A trial's untuned AITER shapes: recorded at its end, shown on every face, exported for AITER.

The trial's engine log is a verbatim public vLLM TP8 log (tests/data/aiter_logs,
vllm#43605) after tunelab's own ``[tunelab] $`` start line, as the engine
wrapper writes it. The exported CSVs are checked against AITER's untuned-CSV
headers recorded from ROCm/aiter (untuned_headers.tsv) and read with pandas as
AITER's tuners read them. The tuning script is run against a stand-in AITER
source tree (AITER cannot be installed here; its tuners need a ROCm GPU) whose
tuner scripts only record how they were called.
"""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pandas as pd
import typer
from textual.app import App, ComposeResult
from textual.widgets import RichLog
from typer.testing import CliRunner

from tui.widgets.run_panel import RunPanel
from tuner.bench.workload import Workload
from tuner.cli import export as export_cli
from tuner.config import EngineConfig
from tuner.engine.aiter_shapes import FAMILIES
from tuner.export.preset import load_preset
from tuner.studies.ab import build_report
from tuner.trials.events import TrialDone
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.session import untuned_of_log
from tuner.trials.store import TrialStore

LOGS = Path(__file__).parent / "data" / "aiter_logs"
CONFIG = EngineConfig(model="MiniMaxAI/MiniMax-M2.5", env={"VLLM_ROCM_USE_AITER": "1"})


def _headers() -> dict[str, list[str]]:
    rows = (LOGS / "untuned_headers.tsv").read_text().splitlines()
    return {
        name: header.split(",")
        for name, header in (r.split("\t") for r in rows if r and not r.startswith("#"))
    }


def _engine_log(tmp_path: Path, *logs: str) -> Path:
    """An engine log as tunelab writes it: an older start, then the start that counts."""
    path = tmp_path / "engine.log"
    older = "(Worker_TP0 pid=1) [aiter] shape is M:1, N:2, K:3, not found tuned config in /tmp/aiter_configs/a4w4_blockscale_tuned_gemm.csv, will use default config!"
    lines = ["[tunelab] $ vllm serve old", older, "[tunelab] $ vllm serve MiniMaxAI/MiniMax-M2.5"]
    for name in logs:
        lines += (LOGS / name).read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _stored_trial(log: Path | None, arm: str | None = None, config: EngineConfig = CONFIG) -> Trial:
    with TrialStore() as store:
        trial = Trial(
            config=config,
            workload=Workload(),
            study="ab-aiter",
            arm=arm,
            repeat=0 if arm else None,
            platform="rocm",
            log_path=str(log) if log else None,
        )
        store.add(trial)
        trial.untuned = untuned_of_log(trial)
        return store.save_result(trial, {"output_throughput": 100.0, "completed": 8, "failed": 0})


def _cli(*args: str) -> tuple[int, str]:
    app = typer.Typer()
    export_cli.register(app)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["export", *args])
    return result.exit_code, result.output


def test_the_trial_records_the_last_launch_and_the_store_keeps_it(tmp_path: Path) -> None:
    trial = _stored_trial(_engine_log(tmp_path, "vllm-43605.log"))
    with TrialStore() as store:
        again = store.get(trial.id)
    shapes = again.untuned_shapes
    # The a4w4 line of the earlier start is not this launch's.
    assert {s.family for s in shapes.shapes} == {"a8w8_blockscale", "bf16", "fmoe"}
    assert len(shapes.gemm) == 3 and len(shapes.moe) == 1
    assert untuned_of_log(Trial(config=CONFIG, workload=Workload())) is None  # no log


def test_export_aiter_untuned_writes_aiters_csvs_and_a_script_that_runs_its_tuners(
    tmp_path: Path,
) -> None:
    trial = _stored_trial(_engine_log(tmp_path, "vllm-43605.log", "vllm-39485.log"))
    out = tmp_path / "out"
    code, output = _cli(trial.id, "--aiter-untuned", "--out", str(out))
    assert code == 0, output
    base = f"trial-{trial.short_id}"
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            f"{base}.a8w8_blockscale_untuned_gemm.csv",
            f"{base}.bf16_untuned_gemm.csv",
            f"{base}.untuned_fmoe.csv",
            f"{base}.aiter-tune.sh",
        ]
    )
    assert "4 GEMM shapes" not in output and "10 GEMM shapes and 1 fused-MoE shape" in output
    assert "AITER_TUNE_GEMM=1" in output and "AITER_ONLINE_TUNE=1" in output
    headers = _headers()
    for family in ("a8w8_blockscale", "bf16", "fmoe"):
        untuned = FAMILIES[family].untuned
        path = out / f"{base}.{untuned}"
        with path.open(newline="") as f:
            assert next(csv.reader(f)) == headers[untuned]
        frame = pd.read_csv(path).drop_duplicates()  # as AITER's base_tuner reads it
        assert list(frame.columns) == headers[untuned]
    blocks = pd.read_csv(out / f"{base}.a8w8_blockscale_untuned_gemm.csv")
    # 1 shape from the TP8 MiniMax log + 7 from the DeepSeek one, each once.
    assert len(blocks) == 8 and {(72, 512, 7168), (8192, 1024, 3072)} <= set(
        blocks.itertuples(index=False, name=None)
    )
    bf16 = pd.read_csv(out / f"{base}.bf16_untuned_gemm.csv", dtype=str)
    assert set(bf16["outdtype"]) == {"torch.float32", "torch.bfloat16"}
    assert (out / f"{base}.aiter-tune.sh").stat().st_mode & 0o111


def test_the_script_calls_each_familys_tuner_on_its_csv(tmp_path: Path) -> None:
    trial = _stored_trial(_engine_log(tmp_path, "vllm-43605.log"))
    out = tmp_path / "out"
    assert _cli(trial.id, "--aiter-untuned", "--out", str(out))[0] == 0
    # A stand-in for AITER's source tree: each tuner script records its arguments.
    root = tmp_path / "aiter"
    calls = tmp_path / "calls.txt"
    for fam in FAMILIES.values():
        script = root / fam.tuner
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(
            f"import sys\nopen({str(calls)!r}, 'a').write(' '.join(sys.argv) + '\\n')\n"
        )
    run = subprocess.run(
        ["bash", str(out / f"trial-{trial.short_id}.aiter-tune.sh")],
        env={"AITER_ROOT": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 3
    block = next(line for line in lines if "gemm_a8w8_blockscale_tune.py" in line)
    assert f"--untune_file {out}/trial-{trial.short_id}.a8w8_blockscale_untuned_gemm.csv" in block
    assert f"--tune_file {out}/trial-{trial.short_id}.a8w8_blockscale_tuned_gemm.csv" in block
    assert any("gemm_moe_tune.py" in line and "untuned_fmoe.csv" in line for line in lines)
    assert (
        f"--b-set AITER_CONFIG_GEMM_BF16={out}/trial-{trial.short_id}.bf16_tuned_gemm.csv"
        in run.stdout
    )
    # Without AITER's source tree it stops with a sentence, not a Python traceback.
    bare = subprocess.run(
        ["bash", str(out / f"trial-{trial.short_id}.aiter-tune.sh")],
        env={"AITER_ROOT": str(tmp_path / "nowhere"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert bare.returncode == 2 and "set AITER_ROOT" in bare.stderr


def test_a_trial_export_carries_the_shapes_and_says_so_atop_the_preset(tmp_path: Path) -> None:
    trial = _stored_trial(_engine_log(tmp_path, "vllm-43605.log"))
    code, output = _cli(trial.id, "--out", str(tmp_path / "out"))
    assert code == 0, output
    base = tmp_path / "out" / f"trial-{trial.short_id}"
    assert Path(f"{base}.bf16_untuned_gemm.csv").is_file() and Path(f"{base}.sh").is_file()
    assert f"launch: {base}.sh" in output  # the launch script, not the tuning script
    toml = Path(f"{base}.toml").read_text()
    assert f"# NOTE: measured while {trial.untuned_shapes.summary()}" in toml
    loaded = load_preset(Path(f"{base}.toml"))
    assert loaded.results["aiter_untuned"]["bf16"] == 2


def test_the_tuis_export_writes_the_same_bundle(tmp_path: Path) -> None:
    from tuner.lab.study import export_trial

    trial = _stored_trial(_engine_log(tmp_path, "vllm-43605.log"))
    written = export_trial(trial, tmp_path / "tui", ["toml", "sh"])
    base = f"trial-{trial.short_id}"
    assert sorted(p.name for p in written) == sorted(
        [
            f"{base}.toml",
            f"{base}.sh",
            f"{base}.a8w8_blockscale_untuned_gemm.csv",
            f"{base}.bf16_untuned_gemm.csv",
            f"{base}.untuned_fmoe.csv",
            f"{base}.aiter-tune.sh",
        ]
    )
    cli = tmp_path / "cli"
    assert _cli(trial.id, "--format", "toml,sh", "--out", str(cli))[0] == 0
    for path in written:
        if path.suffix == ".csv":
            assert path.read_text() == (cli / path.name).read_text()


def test_nothing_to_export_is_a_message_and_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "cpu.log"
    log.write_text("[tunelab] $ vllm serve tiny\nINFO Using CPU_ATTN backend.\n")
    trial = _stored_trial(log)
    out = tmp_path / "out"
    code, output = _cli(trial.id, "--aiter-untuned", "--out", str(out))
    assert code == 2 and "nothing to export" in output and "VLLM_ROCM_USE_AITER=1" in output
    assert not out.exists()
    code, output = _cli("--preset", "x.toml", "--aiter-untuned")
    assert code == 2 and "give a TRIAL id" in output
    # A plain export of a trial without shapes writes no AITER file.
    assert _cli(trial.id, "--out", str(out))[0] == 0
    assert not any("untuned" in p.name or "aiter" in p.name for p in out.iterdir())


def test_the_ab_note_names_the_arms_that_ran_untuned(tmp_path: Path) -> None:
    a = _stored_trial(_engine_log(tmp_path, "vllm-43605.log"), arm="A")
    (tmp_path / "b").mkdir()
    b_config = EngineConfig(model=CONFIG.model, env={**CONFIG.env, "AITER_ONLINE_TUNE": "1"})
    b = _stored_trial(_engine_log(tmp_path / "b", "vllm-39485.log"), arm="B", config=b_config)
    report = build_report([a, b], study="ab-aiter", objective="output_throughput")
    note = next(n for n in report.notes if n.startswith("AITER:"))
    assert "A 4, B 7 (4 only in A, 7 only in B)" in note
    assert report.to_dict()["notes"] == report.notes


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield RunPanel(id="run")


async def test_the_run_panel_shows_the_cores_sentence_when_a_trial_ends(tmp_path: Path) -> None:
    trial = _stored_trial(_engine_log(tmp_path, "vllm-43605.log"))
    app = Host()
    async with app.run_test(size=(200, 24)) as pilot:
        app.query_one(RunPanel).trial_event(TrialDone(trial))
        await pilot.pause()
        logged = " ".join(
            " ".join(s.text for s in app.query_one("#run-log", RichLog).lines).split()
        )
        assert trial.untuned_shapes.summary() in logged
        assert f"tunelab export {trial.short_id} --aiter-untuned" in logged
    assert trial.status is TrialStatus.DONE
