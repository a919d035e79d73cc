"""``tunelab results``, ``tunelab show``: what the store holds.

``results`` lists stored trials (table, ``--json`` or ``--csv``), ``show``
prints one trial with its log's tail; both (not --csv) say what the
output-drift guard found against the study's baseline (tuner.cli.guard_view).
Both first mark trials of a killed tunelab as interrupted. ``tunelab run``
(tuner.cli.run) prints its trial with :func:`print_trial`. Neither command
loads the engine or the HTTP stack.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from tuner.bench.host_noise import host_note
from tuner.bench.metrics import delivery_warning
from tuner.bench.window import window_note
from tuner.cli import options as opt
from tuner.cli.guard_view import guard_cell, guard_json, study_guards
from tuner.cli.safe_text import clean, markup
from tuner.cli.study_output import jsonable
from tuner.engine import effective
from tuner.lab.study import Study
from tuner.profiles.record import ProfileRecord
from tuner.trials.export import to_csv, to_json
from tuner.trials.guard_check import guard_of, trial_verdict
from tuner.trials.model import Trial, TrialStatus, metric
from tuner.trials.store import StoreError
from tuner.trials.vllm_sweep import SweepExportError, write_sweep

if TYPE_CHECKING:
    from tuner.trials.guard_check import TrialGuard
    from tuner.trials.store import TrialStore

LOG_TAIL_LINES = 20


def register(app: typer.Typer) -> None:
    """Adds ``results`` and ``show`` to the tunelab CLI."""
    app.command("results")(results_command)
    app.command("show")(show_command)


def results_command(
    study: opt.StudyFilterOpt = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Only trials in this state (e.g. done).")
    ] = None,
    as_json: opt.JsonOpt = False,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="Print CSV on stdout (one row per trial).")
    ] = False,
    vllm_sweep: Annotated[
        Path | None,
        typer.Option(
            "--vllm-sweep",
            metavar="DIR",
            help="Write the trials in `vllm bench sweep`'s layout under DIR "
            "(SERVE-...-BENCH-.../run=N.json, summary.json, summary.csv), "
            "for `vllm bench sweep plot DIR`.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a non-empty --vllm-sweep directory.")
    ] = False,
    store_path: opt.StoreOpt = None,
) -> None:
    """List stored trials: status, workload, objective, throughput, latency, output guard."""
    if as_json and as_csv:
        raise opt.usage_error("results", "choose one of --json and --csv")
    if status is not None and status not in {s.value for s in TrialStatus}:
        raise opt.usage_error(
            "results",
            f"unknown status {status!r}; use one of {', '.join(s.value for s in TrialStatus)}",
        )
    with opt.open_store("results", store_path, recover=False) as store:
        scan = store.scan(study, status)
        trials = scan.trials
        if scan.bad:
            # One bad row must not hide the rest (issue 19): name it, show the others.
            listed = "; ".join(f"{clean(b.id)} ({clean(b.reason)})" for b in scan.bad)
            typer.echo(
                f"warning: {len(scan.bad)} unreadable row(s) left out of {store.path}: {listed}",
                err=True,
            )
            if as_json:
                typer.echo(
                    json.dumps({"unreadable_rows": [b.to_dict() for b in scan.bad]}), err=True
                )
        if as_csv:
            typer.echo(to_csv(trials), nl=False)
            return
        if vllm_sweep is not None:
            _write_vllm_sweep(trials, vllm_sweep, force=force, as_json=as_json)
            return
        guards = study_guards(store, trials)
        if as_json:
            rows = json.loads(to_json(trials))
            for row in rows:
                g = guards.get(row["id"])
                row["guard_verdict"] = guard_json(g) if g is not None else None
            typer.echo(json.dumps(rows, indent=1))
            return
        _print_table(trials, store.path, study, guards)
        if study is not None:
            # Deferred: the plans load every study module; only a study's listing needs them.
            from tuner.lab.execute import describe, stored_plans

            for plan in stored_plans(store, study).values():  # the design the study ran with
                Console(highlight=False).print(f"design {markup(describe(plan))}")


def _write_vllm_sweep(trials: list[Trial], out: Path, *, force: bool, as_json: bool) -> None:
    try:
        written = write_sweep(trials, out, force=force)
    except SweepExportError as exc:
        raise opt.usage_error("results", f"{exc} ({exc.fix})" if exc.fix else str(exc)) from None
    except OSError as exc:
        raise opt.usage_error("results", f"cannot write {out}: {exc.strerror or exc}") from None
    if as_json:
        typer.echo(json.dumps(written.to_dict(), indent=1))
        return
    varied = ", ".join(written.serve_keys + written.bench_keys) or "nothing (one combination)"
    typer.echo(
        f"wrote {written.runs} run(s) in {len(written.combinations)} combination(s) to {out} "
        f"(varying: {varied})"
    )
    for trial_id, why in written.skipped.items():
        typer.echo(f"  left out {trial_id[:8]}: {why}")
    typer.echo(f"plot it with vLLM's own tool: vllm bench sweep plot {out}")


def show_command(
    trial_id: Annotated[
        str, typer.Argument(metavar="TRIAL", help="Trial id or a unique prefix of it.")
    ],
    as_json: opt.JsonOpt = False,
    store_path: opt.StoreOpt = None,
) -> None:
    """Show one trial in full: config, workload, findings, results, telemetry, log path and tail."""
    with opt.open_store("show", store_path, recover=False) as store:
        try:
            trial = store.get(trial_id)
        except StoreError as exc:  # not found, ambiguous, or an unreadable row
            raise opt.usage_error("show", str(exc)) from None
        guard_line = _guard_line(store, trial)
        guard = study_guards(store, [trial])[trial.id]
    if as_json:
        data = jsonable(trial.to_dict())
        data["log_tail"] = _log_tail(trial.log_path, LOG_TAIL_LINES)
        data["guard_verdict"] = guard_json(guard)
        typer.echo(json.dumps(data, indent=1))
        return
    print_trial(trial, tail=True)
    if guard_line:
        typer.echo(guard_line)


def _guard_line(store: TrialStore, trial: Trial) -> str | None:
    """``Output guard: ...``: the trial's drift verdict against its study baseline (issue 16)."""
    # Deferred for start-up time, like the other imports of this command.

    run = guard_of(trial)
    if run is None:
        return None
    base = Study(store, trial.study).baseline()
    cost = f" ({len(run.probes)} probes, {run.seconds:.1f} s)"
    if base is not None and base.trial.id == trial.id:
        if run.error:
            return clean(
                f"Output guard: this trial is the study's baseline; its probes failed: {run.error}"
            )
        return f"Output guard: this trial is the study's baseline ({len(run.probes)} probes)"
    verdict = trial_verdict(base.trial if base else None, trial)
    assert verdict is not None  # the trial has a guard run
    against = f" vs baseline {base.trial.short_id}" if base else ""
    return clean(f"Output guard{against}: {verdict.summary()}{cost}")


# -- rendering --------------------------------------------------------------------
def _log_tail(path: str | None, lines: int) -> list[str]:
    if not path or not Path(path).is_file():
        return []
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 64 * 1024))
        text = fh.read().decode("utf-8", "replace")
    return text.splitlines()[-lines:]


def _fmt(value: object, spec: str = ",.1f") -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):
        return format(value, spec)
    return str(value)


def _workload_text(trial: Trial) -> str:
    wl = trial.workload
    conc = wl.concurrency if wl.concurrency is not None else "∞"
    rate = "inf" if math.isinf(wl.request_rate) else f"{wl.request_rate:g}/s"
    return f"{wl.input_len}/{wl.output_len} x{wl.num_prompts} c{conc} r{rate}"


_STATUS_STYLE = {
    "done": "green",
    "failed": "red",
    "skipped": "yellow",
    "interrupted": "magenta",
    "starting": "cyan",
    "measuring": "cyan",
    "queued": "dim",
}


def _print_table(
    trials: list[Trial], path: Path, study: str | None, guards: dict[str, TrialGuard]
) -> None:
    """The trials, one row each; ``guards``: each one's output-guard verdict (tuner.cli.guard_view)."""
    console = Console(highlight=False)
    if not trials:
        where = f" in study {markup(repr(study))}" if study else ""
        console.print(f"No trials{where} in {markup(path)}. Run one with `tunelab run`.")
        return
    table = Table(title=f"Trials ({len(trials)}) in {markup(path)}", title_justify="left")
    for name, justify in (
        ("id", "left"),
        ("study", "left"),
        ("status", "left"),
        ("config", "left"),
        ("workload", "left"),
        ("objective", "right"),
        ("out tok/s", "right"),
        ("p99 TTFT ms", "right"),
        ("p99 ITL ms", "right"),
        ("backend", "left"),
        ("start s", "right"),
        ("guard", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in trials:
        style = _STATUS_STYLE.get(t.status.value, "")
        objective = t.objective_value
        config = t.config_id[:8] + (f" {markup(t.arm)}" if t.arm else "")
        if t.is_probe:  # one load of a capacity search: its load and ✓/✗ (the TUI's cell)
            from tuner.lab.reports import probe_view  # the studies load only for probes

            view = probe_view(t)
            config = t.config_id[:8] + f" {markup(view.cell())}" if view else config
        # Every stored string is foreign (a handed-over store, a hostile name): escaped.
        table.add_row(
            markup(t.short_id),
            markup(t.study),
            f"[{style}]{t.status.value}[/]",
            config,
            _workload_text(t),
            f"{markup(t.objective)}={_fmt(objective, ',.2f')}" if objective is not None else "-",
            _fmt(metric(t, "output_throughput")),
            _fmt(metric(t, "p99_ttft_ms")),
            _itl_cell(t),
            markup(t.backend_actual or "-"),
            _fmt(t.startup_seconds),
            guard_cell(guards.get(t.id)),
        )
    console.print(table)


def _itl_cell(trial: Trial) -> str:
    """p99 ITL, marked ``⚠`` when most responses came in one piece (the figure then measures
    nothing: tuner.bench.metrics.delivery_warning), as the TUI's Results table marks it."""
    shown = _fmt(metric(trial, "p99_itl_ms"))
    if isinstance(trial.results, dict) and delivery_warning(trial.results, short=True):
        return f"[bold yellow]⚠[/] [dim]{shown}[/] (one piece)"
    return shown


def print_trial(trial: Trial, *, tail: bool) -> None:
    """One trial in full, section by section (every stored string escaped: it is foreign)."""
    console = Console(highlight=False)
    _print_heading(console, trial)
    _print_setup(console, trial)
    _print_results(console, trial)
    _print_server_and_gpu(console, trial)
    if trial.failure_reason:
        console.print(f"[red]Reason:[/] {markup(trial.failure_reason)}")
    untuned = trial.untuned_shapes.summary()
    if untuned:
        console.print(
            f"[yellow]AITER:[/] {markup(untuned)}  "
            f"[dim](tunelab export {trial.short_id} --aiter-untuned)[/]"
        )
    profile = ProfileRecord.from_dict(trial.profile)
    if profile is not None:  # a window after the measured run (issue 29)
        console.print(f"[bold]Profile:[/] {markup(profile.describe().removeprefix('profile: '))}")
    if trial.log_path:
        console.print(f"[bold]Engine log:[/] {markup(trial.log_path)}")
        if tail:
            for line in _log_tail(trial.log_path, LOG_TAIL_LINES):
                console.print(f"  [dim]{markup(line)}[/]")


def _print_heading(console: Console, trial: Trial) -> None:
    """Id, study, status, arm and repeat; the model, its knobs and the workload."""
    style = _STATUS_STYLE.get(trial.status.value, "")
    console.print(
        f"[bold]Trial {markup(trial.id)}[/] · study {markup(trial.study)} · [{style}]{trial.status.value}[/]"
        + (f" · arm {markup(trial.arm)}" if trial.arm else "")
        + (f" · repeat {trial.repeat}" if trial.repeat is not None else "")
    )
    cfg = trial.config
    console.print(f"[bold]Model:[/] {markup(cfg.model)}  [dim](config {trial.config_id})[/]")
    knobs = {**cfg.env, **cfg.engine}
    if knobs:
        console.print(
            "[bold]Knobs:[/] " + markup(" ".join(f"{k}={v}" for k, v in sorted(knobs.items())))
        )
    console.print(
        f"[bold]Workload:[/] {_workload_text(trial)} warm-up {trial.workload.warmup_requests}"
    )


def _print_setup(console: Console, trial: Trial) -> None:
    """What ran: vLLM and GPUs, the attention backend, the effective config, start-up, findings."""
    if trial.vllm_version or trial.platform:
        gpus = f", GPUs: {', '.join(trial.gpu_names)}" if trial.gpu_names else ""
        slot = f", CUDA_VISIBLE_DEVICES={trial.gpu_slot}" if trial.gpu_slot else ""
        console.print(
            "[bold]vLLM:[/] "
            + markup(f"{trial.vllm_version or '?'} on {trial.platform or '?'}{gpus}{slot}")
        )
    if trial.backend_actual or trial.backend_requested:
        how = " (implied by the platform)" if trial.backend_inferred else ""
        console.print(
            f"[bold]Attention backend:[/] requested {markup(trial.backend_requested or 'auto')}, "
            f"actual {markup(trial.backend_actual or 'unknown')}{how}"
        )
    ran = effective.of_trial(trial.effective)
    if ran is not None:
        differ = ", ".join(f"{m.knob} ({m.requested} -> {m.effective})" for m in ran.mismatches)
        console.print(
            f"[bold]Effective config:[/] {len(ran.values)} knob(s) read from vLLM's log; "
            + (
                f"[yellow]differs from the request: {markup(differ)}[/]"
                if differ
                else "as requested"
            )
        )
    if trial.environment:
        facts = ", ".join(f"{k} {v}" for k, v in trial.environment.items())
        console.print(f"[bold]Environment:[/] {markup(facts)}")
    if trial.startup_seconds is not None:
        console.print(f"[bold]Engine start-up:[/] {trial.startup_seconds:.1f} s")
    for f in trial.findings:
        color = {"error": "red", "warning": "yellow"}.get(f.severity.value, "cyan")
        console.print(f"[{color}]{f.severity.value}[/]: {markup(f.message)}")


# label, result key(s), format: the rows of a trial's results.
_RESULT_ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("output tok/s", ("output_throughput",), ",.1f"),
    ("requests/s", ("request_throughput",), ",.2f"),
    ("TTFT ms mean/p50/p99", ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms"), ",.1f"),
    ("TPOT ms mean/p50/p99", ("mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms"), ",.1f"),
    ("ITL ms mean/p50/p99", ("mean_itl_ms", "median_itl_ms", "p99_itl_ms"), ",.1f"),
    ("E2E ms mean/p50/p99", ("mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms"), ",.1f"),
    ("completed / failed", ("completed", "failed"), ".0f"),
)


def _print_results(console: Console, trial: Trial) -> None:
    """The measured figures (tuner.trials.model.metric reads each), goodput when there is one."""
    if not trial.results:
        return
    for label, keys, spec in _RESULT_ROWS:
        console.print(f"  {label:<22} " + " / ".join(_fmt(metric(trial, k), spec) for k in keys))
    if trial.results.get("request_goodput") is not None:
        console.print(f"  {'goodput req/s':<22} {_fmt(trial.results['request_goodput'], ',.2f')}")

    host = host_note(trial.results)
    if host:
        console.print(f"[yellow]host:[/] {markup(host)}")
    window = None if trial.is_probe else window_note(trial.results)
    if window is not None:  # a capacity probe's load sets its window
        console.print(f"[yellow]window:[/] {markup(window.describe())}")


def _print_server_and_gpu(console: Console, trial: Trial) -> None:
    """The server's own view (its /metrics) and the GPU telemetry window, where recorded."""
    if trial.server and trial.server.get("available"):
        notes = trial.server.get("notes") or []
        srv = trial.server
        peak = srv.get("peak_kv_cache_usage")
        console.print(
            f"[bold]Server view:[/] peak KV-cache use {_fmt(peak * 100 if peak is not None else None, '.0f')} %, "
            f"peak running {_fmt(srv.get('peak_running_requests'), '.0f')}, "
            f"peak waiting {_fmt(srv.get('peak_waiting_requests'), '.0f')}, "
            f"preemptions {_fmt(srv.get('preemptions'), '.0f')}"
            + "".join(f"; {markup(n)}" for n in notes)
        )
    if trial.telemetry:
        tel = trial.telemetry
        vram = tel.get("peak_vram_bytes")
        console.print(
            f"[bold]GPU:[/] peak VRAM {_fmt(vram / 1024**3 if vram else None, '.1f')} GiB, mean power "
            f"{_fmt(tel.get('mean_power_w'), '.0f')} W, energy {_fmt(tel.get('energy_j'), ',.0f')} J, "
            f"{_fmt(tel.get('tokens_per_joule'), '.2f')} tokens/J"
        )
