"""``tunelab check``: what the rules say about a config on a target, before anything runs.

The config comes from a preset, ``--model`` and ``--set KEY=VALUE`` items;
the target is the installed vLLM (introspected in a subprocess) unless
``--vllm-version``/``--platform`` name another machine, so a ROCm preset can
be checked on a laptop. The findings are :func:`tuner.lab.checks.rules_findings`'s,
the call the TUI's findings panel makes too; they print grouped by severity (or as
JSON); the exit status is 1 when any finding is an error and 2 for input tunelab cannot
use, so scripts can gate a launch on it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from tuner.cli import check_options as co
from tuner.cli.consent_options import grant_consent
from tuner.cli.safe_text import clean
from tuner.cli.safe_text import markup as escape
from tuner.knobs.gpus import GpuNameError, lookup
from tuner.knobs.versions import parse_version
from tuner.lab import config as lab_config
from tuner.lab.checks import ask_vllm, blocks_run, no_findings_text, rules_findings, with_verdict
from tuner.lab.target import for_check
from tuner.lab.workload import shape_for_check
from tuner.model import ModelError, analyze

if TYPE_CHECKING:
    from tuner.config import EngineConfig
    from tuner.knobs.gpus import GpuSpec
    from tuner.model import ModelInfo
    from tuner.rules import Finding, Target, WorkloadShape


def register(app: typer.Typer) -> None:
    """Adds the ``check`` command to the tunelab CLI."""
    app.command("check")(check_command)


def fail(message: str) -> typer.Exit:
    """Prints a usage error to stderr and returns the exit (status 2) to raise.

    The message may quote foreign text (a model path, a config.json value): cleaned.
    """
    typer.echo(f"tunelab check: {clean(message)}", err=True)
    return typer.Exit(2)


def check_command(
    preset: co.PresetOpt = None,
    model: co.ModelOpt = None,
    set_items: co.SetOpt = None,
    vllm_version: co.VllmVersionOpt = None,
    platform: co.PlatformOpt = None,
    gpus: co.GpuCountOpt = None,
    gpu: co.GpuOpt = None,
    vram_gib: co.VramOpt = None,
    concurrency: co.ConcurrencyOpt = None,
    input_len: co.InputLenOpt = None,
    output_len: co.OutputLenOpt = None,
    goal: co.GoalOpt = None,
    offline: co.OfflineOpt = False,
    as_json: co.JsonOpt = False,
    allow_code: co.AllowCodeOpt = False,
    allow_env: co.AllowEnvOpt = None,
    validate: co.ValidateOpt = False,
) -> None:
    """Check a config against the rules for its target; exit 1 on errors, 2 on bad input."""
    grant_consent(allow_code, allow_env)
    _check_version(vllm_version)
    spec = _gpu(gpu)
    loaded = _load_preset(preset) if preset else None
    config = _build_config(loaded, model, set_items or [])
    plat = platform.value if platform else (spec.platform if spec else None)
    target, notes = _target(loaded, vllm_version, plat, gpus, vram_gib)
    target = target.with_gpu(spec, gpus=gpus, vram_gib=vram_gib)
    info, model_note = _model(
        config.model, from_preset=model is None and loaded is not None, offline=offline
    )
    if model_note:
        notes.append(model_note)
    workload = _workload(loaded, concurrency, input_len, output_len, goal.value if goal else None)
    findings = rules_findings(config, info, target, workload)
    if validate and not blocks_run([f for f in findings if f.rule == "policy"]):
        verdict = ask_vllm(config)
        notes.append(f"{verdict.note} (on this machine)")
        findings = with_verdict(findings, verdict, config)
    if as_json:
        for note in notes:
            typer.echo(f"note: {clean(note)}", err=True)
        typer.echo(json.dumps([f.to_dict() for f in findings], indent=1))
    else:
        _print(findings, config, info, target, notes)
    if blocks_run(findings):
        raise typer.Exit(1)


def _check_version(version: str | None) -> None:
    """A ``--vllm-version`` the catalogue cannot read is a usage error, before anything else."""
    if version is None:
        return

    try:
        parse_version(version)
    except ValueError as exc:
        raise fail(f"--vllm-version: {exc}") from None


def _gpu(name: str | None) -> GpuSpec | None:
    """The ``--gpu`` spec (tuner.knobs.gpus), or a usage error naming the known GPUs."""
    if name is None:
        return None

    try:
        return lookup(name)
    except GpuNameError as exc:
        raise fail(str(exc)) from None


def _load_preset(path: str) -> Any:
    try:
        loaded = lab_config.load(path)
    except lab_config.ConfigInputError as exc:
        raise fail(str(exc)) from None
    if loaded.note:
        typer.echo(f"note: {clean(loaded.note)}", err=True)
    return loaded.preset


def _build_config(loaded: Any, model: str | None, items: list[str]) -> EngineConfig:
    """The config to check: tuner.lab.config's one assembly (no preset, no model: empty model)."""
    try:
        return lab_config.build_config(loaded, model, items)
    except lab_config.ConfigInputError as exc:
        raise fail(str(exc)) from None


def _target(
    loaded: Any, version: str | None, platform: str | None, gpus: int | None, vram: float | None
) -> tuple[Target, list[str]]:
    """The target (tuner.lab.target.for_check owns the precedence)."""
    return for_check(version, platform, gpus, vram, getattr(loaded, "target", None))


def _model(name: str, *, from_preset: bool, offline: bool) -> tuple[ModelInfo | None, str]:
    if not name:
        return None, "no model given: model-specific rules were skipped"

    try:
        return analyze(name, offline=True if offline else None), ""
    except ModelError as exc:
        if from_preset:
            return None, f"model not analyzed ({exc}); model-specific rules were skipped"
        raise fail(f"{exc}\n  fix: {exc.fix}" if exc.fix else str(exc)) from None


def _workload(
    loaded: Any,
    concurrency: int | None,
    input_len: int | None,
    output_len: int | None,
    goal: str | None,
) -> WorkloadShape | None:
    """The rules' workload (tuner.lab.workload.shape_for_check owns the merge)."""
    stored = getattr(loaded, "workload", None)
    return shape_for_check(stored, input_len, output_len, concurrency, goal)


_STYLE = {"error": "bold red", "warning": "yellow", "advice": "cyan"}
_TITLE = {"error": "Errors", "warning": "Warnings", "advice": "Advice"}


def _target_line(target: Target) -> str:
    """``Target: vLLM 0.32 on rocm, 8 GPUs x 192 GiB MI300X (gfx942) (given)``, escaped."""
    plat = escape(target.platform or "unknown platform")
    vram = f" x {target.vram_gib:g} GiB" if target.vram_gib else ""
    if target.gpu_name:
        part = f", {target.partition}" if target.partition else ""
        vram += f" {escape(target.gpu_name)} ({escape(f'{target.gpu_arch}{part}')})"
    how = escape("introspected" if target.introspected else (target.note or "given"))
    version = escape(target.vllm_version or "(version unknown)")
    return (
        f"[bold]Target:[/] vLLM {version} on {plat}, "
        f"{target.gpus} GPU{'s' if target.gpus != 1 else ''}{vram} ({how})"
    )


def _print(
    findings: list[Finding],
    config: EngineConfig,
    info: ModelInfo | None,
    target: Target,
    notes: list[str],
) -> None:
    """Prints the findings for a person; every foreign text escaped (tuner.cli.safe_text).

    The target comes from a preset or flags, the model facts from a config.json:
    a ``[/]`` there would end a style never opened (MarkupError, output lost),
    a ``[link=...]`` would become a link, an escape sequence would reach the
    terminal. All of it goes through :func:`escape` (safe_text.markup).
    """
    console = Console(highlight=False)
    console.print(_target_line(target))
    if info is not None:
        moe = f", MoE {info.moe.num_experts}x{info.moe.experts_per_token}" if info.moe else ""
        console.print(
            f"[bold]Model:[/] {escape(info.short_name)}: {escape(info.architecture)}, "
            f"{escape(info.attention)}{moe}, "
            f"{info.param_count / 1e9:.2f} B params, {info.weight_bytes / 1024**3:.1f} GiB weights, "
            f"{info.kv_bytes_per_token():,} KV bytes/token"
        )
    for note in notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    if not findings:
        said = escape(no_findings_text(info, target))
        console.print(f"[green]{said}[/]" if said.startswith("No findings:") else said)
        return
    for severity in ("error", "warning", "advice"):
        group = [f for f in findings if str(f.severity) == severity]
        if not group:
            continue
        console.print(f"\n[{_STYLE[severity]}]{_TITLE[severity]} ({len(group)})[/]")
        for finding in group:
            knobs = ", ".join(finding.knobs)
            console.print(f"  [{_STYLE[severity]}]•[/] {escape(finding.message)}")
            detail = f"    [dim]{escape(finding.rule)}"
            if knobs:
                detail += f" · {escape(knobs)}"
            detail += f" · {escape(finding.source)}[/]"
            console.print(detail)
            if finding.fix:
                fix = " ".join(
                    f"{k}={'(unset)' if v is None else v}" for k, v in finding.fix.items()
                )
                console.print(f"    fix: [bold]{escape(fix)}[/]")
    counts = {
        s: sum(1 for f in findings if str(f.severity) == s) for s in ("error", "warning", "advice")
    }
    console.print(
        f"\n{counts['error']} errors, {counts['warning']} warnings, {counts['advice']} advice"
    )
