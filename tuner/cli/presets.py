"""``tunelab presets list|show|check``: the shipped and user presets, and checking a file.

``check`` is what a user runs on a preset someone sent them: schema
validation first (every problem with its key, line and fix), then the rules
(:func:`tuner.lab.checks.rules_findings`, as ``tunelab check`` and the TUI ask
them) against the preset's own target (vLLM version, platform, GPU count;
``--vllm-version``/``--platform`` override it), and, when the installed vLLM
differs from that target, what changes there: knobs that do not exist or have
no effect on the installed vLLM, and findings that appear only there. Exit
status: 0 when the preset is usable on its target, 1 on schema or rule
errors, 2 on bad input (file not found, bad option).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tuner import knobs
from tuner.cli.check_options import PlatformName
from tuner.cli.preset_verify import verify_command
from tuner.cli.safe_text import one_line
from tuner.export.catalog import find_preset, list_presets, resolve_preset, shipped_dir, user_dir
from tuner.export.errors import ExportError, PresetError
from tuner.export.preset import load_preset, read_preset_text, resolve_model
from tuner.export.render import parse_formats, render_texts
from tuner.export.validate import validate_text
from tuner.introspect import IntrospectError, introspect
from tuner.knobs.gpus import from_telemetry_name
from tuner.knobs.versions import parse_version
from tuner.lab.checks import blocks_run, rules_findings
from tuner.model import ModelError, analyze
from tuner.rules import Target, WorkloadShape
from tuner.rules import Target as RulesTarget

if TYPE_CHECKING:
    from pathlib import Path

    from tuner.export.preset import Preset
    from tuner.rules import Finding

presets_app = typer.Typer(
    name="presets",
    help="List, show and check presets (shipped ones and your own).",
    no_args_is_help=True,
    add_completion=False,
)


def register(app: typer.Typer) -> None:
    """Adds the ``presets`` command group to the tunelab CLI."""
    app.add_typer(presets_app, name="presets")


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"tunelab presets: {message}", err=True)
    return typer.Exit(code)


@presets_app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List the shipped presets and yours, with their target and purpose."""
    entries = list_presets()
    if as_json:
        rows = [
            {
                "name": e.name,
                "origin": e.origin,
                "path": str(e.path),
                "model": e.preset.target.model if e.preset else None,
                "vllm_version": e.preset.target.vllm_version if e.preset else None,
                "platform": e.preset.target.platform if e.preset else None,
                "description": e.preset.description if e.preset else None,
                "error": e.error or None,
            }
            for e in entries
        ]
        typer.echo(json.dumps(rows, indent=1))
        return
    if not entries:
        typer.echo(
            f"No presets found (shipped: {shipped_dir() or 'not found'}; yours: {user_dir()})."
        )
        return
    # Names, targets, descriptions and errors come from files in the user's preset folder:
    # each is shown as one clean line (no escapes, no bidi controls, no fake extra rows).
    names = [one_line(e.name) for e in entries]
    width = max(len(n) for n in names)
    for name, entry in zip(names, entries, strict=True):
        if entry.preset is None:
            first = entry.error.splitlines()[1].strip() if "\n" in entry.error else entry.error
            typer.echo(f"{name:<{width}}  [{entry.origin}] BROKEN: {one_line(first)}")
            continue
        tgt = entry.preset.target
        where = one_line(f"{tgt.platform or '?'} vLLM {tgt.vllm_version or '?'}")
        typer.echo(f"{name:<{width}}  [{entry.origin}] {where:<18} {one_line(tgt.model)}")
        if entry.preset.description:
            typer.echo(f"{'':<{width}}  {one_line(entry.preset.description)}")


@presets_app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(help="Preset name (see `presets list`) or a .toml path.")],
    fmt: Annotated[
        str, typer.Option("--format", help="What to print: toml (the file), sh, yaml or docker.")
    ] = "toml",
    allow_code: Annotated[
        bool,
        typer.Option(
            "--allow-code",
            help="Accept engine arguments that load or run code (trust-remote-code, "
            "tool-parser-plugin, ...): only for presets you trust.",
        ),
    ] = False,
) -> None:
    """Print a preset, or what it exports to (launch script, YAML, docker line)."""
    try:
        path = find_preset(name)
        (which,) = parse_formats(fmt)[:1]
        if which == "toml":
            typer.echo(path.read_text(encoding="utf-8"), nl=False)
            return
        preset = load_preset(path, allow_code=allow_code)
        typer.echo(render_texts(preset, [which], allow_code=allow_code)[which], nl=False)
    except (PresetError, ExportError) as exc:
        raise _fail(str(exc)) from None


@presets_app.command("check")
def check_command(
    file: Annotated[
        str, typer.Argument(help="Preset file (or the name of a shipped/user preset).")
    ],
    vllm_version: Annotated[
        str | None,
        typer.Option(
            "--vllm-version", help="Check against this vLLM version instead of the preset's."
        ),
    ] = None,
    platform: Annotated[
        PlatformName | None,
        typer.Option("--platform", help="Check against this platform instead of the preset's."),
    ] = None,
    model_config: Annotated[
        str | None,
        typer.Option(
            "--model-config",
            help="A local model dir or config.json to analyze instead of the preset's model "
            "(for model-specific rules when the model is not downloaded).",
        ),
    ] = None,
    allow_env: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-env", help="Allow this otherwise refused environment variable (repeatable)."
        ),
    ] = None,
    compare_installed: Annotated[
        bool,
        typer.Option(
            "--compare-installed/--no-compare-installed",
            help="Show what differs on the installed vLLM.",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    allow_code: Annotated[
        bool,
        typer.Option(
            "--allow-code",
            help="Accept engine arguments that load or run code (trust-remote-code, "
            "tool-parser-plugin, ...): only for presets you trust.",
        ),
    ] = False,
) -> None:
    """Validate a preset and check it against its target; exit 1 on errors."""
    path = _resolve_checked(file, vllm_version)
    report, preset = _validated(path, allow_env, allow_code)
    if preset is None:
        _emit(report, as_json)
        raise typer.Exit(1)
    target = _preset_target(preset, vllm_version, platform.value if platform else None)
    model, model_note = _analyze(preset, model_config)
    findings = _rules(preset, model, target)
    report.update(
        {
            "preset": preset.name,
            "target": target.to_dict(),
            "model_note": model_note,
            "findings": [f.to_dict() for f in findings],
        }
    )
    if compare_installed:
        report["installed"] = _installed_differences(preset, model, target, findings)
    _emit(report, as_json)
    if blocks_run(findings):
        raise typer.Exit(1)


def _resolve_checked(file: str, vllm_version: str | None) -> Path:
    """The preset's path (a file or a shipped/user name), with ``--vllm-version`` checked."""
    try:
        found = resolve_preset(file)
    except PresetError as exc:
        raise _fail(str(exc)) from None
    if found.note:
        typer.echo(f"note: {found.note}", err=True)
    if vllm_version is not None:
        try:
            parse_version(vllm_version)
        except ValueError as exc:
            raise _fail(f"--vllm-version: {exc}") from None
    return found.path


def _validated(
    path: Path, allow_env: list[str] | None, allow_code: bool
) -> tuple[dict[str, Any], Preset | None]:
    """The schema check's report and the preset (None when the file is not a valid preset)."""
    try:
        text = read_preset_text(path)
    except PresetError as exc:
        raise _fail(str(exc), 1) from None
    allowed = tuple(allow_env or ())
    result = validate_text(text, source=str(path), allow_env=allowed, allow_code=allow_code)
    report: dict[str, Any] = {
        "file": str(path),
        "schema_errors": [i.format(str(path)) for i in result.errors],
        "schema_warnings": [i.format(str(path)) for i in result.warnings],
    }
    return report, result.preset


# Re-running a preset's workload here and gating on a regression (issue 17).
presets_app.command("verify")(verify_command)


def _preset_target(preset: Preset, version: str | None, platform: str | None) -> Target:

    tgt = preset.target
    return Target(
        vllm_version=version or tgt.vllm_version,
        platform=platform or tgt.platform,
        gpus=max(1, tgt.gpu_count or 1),
        note="given" if (version or platform) else "preset",
    ).with_gpu(from_telemetry_name(tgt.gpu_name), gpus=max(1, tgt.gpu_count or 1))


def _analyze(preset: Preset, model_config: str | None) -> tuple[Any, str]:

    name = model_config or preset.target.model
    try:
        if name.startswith("tunelab:"):
            name = resolve_model(name)
        return analyze(name, offline=True), ""
    except ModelError as exc:
        first = str(exc).splitlines()[0]
        return (
            None,
            f"model not analyzed ({first}); model-specific rules were skipped (see --model-config)",
        )
    except Exception as exc:
        return (
            None,
            f"model not analyzed ({type(exc).__name__}: {exc}); model-specific rules were skipped",
        )


def _rules(preset: Preset, model: Any, target: Target) -> list[Finding]:

    stored = preset.workload or {}
    workload = (
        WorkloadShape(
            input_len=stored.get("input_len"),
            output_len=stored.get("output_len"),
            concurrency=stored.get("concurrency"),
            goal=stored.get("goal"),
        )
        if stored
        else None
    )
    return rules_findings(preset.config, model, target, workload)


def _installed_differences(
    preset: Preset, model: Any, target: Target, findings: list[Finding]
) -> dict[str, Any]:
    """How the installed vLLM differs from the target, and what that changes for this preset."""
    try:
        info = introspect(sys.executable)
    except IntrospectError as exc:
        return {"available": False, "note": f"introspection failed: {exc}"}
    if not info.available:
        return {"available": False, "note": f"no vLLM installed here ({info.error})"}
    same = info.version == target.vllm_version and info.platform == target.platform
    out: dict[str, Any] = {
        "available": True,
        "vllm_version": info.version,
        "platform": info.platform,
        "same_as_target": same,
        "knobs": [],
        "new_findings": [],
    }
    if same:
        return out
    for key in [*preset.config.env, *preset.config.engine]:
        knob = knobs.get(key)
        if knob is None:
            continue
        on_target = knobs.available(knob, target.vllm_version, target.platform)
        here = knobs.available(knob, info.version, info.platform)
        if here.status != on_target.status:
            out["knobs"].append({"key": key, "status": str(here.status), "reason": here.reason})
    installed = RulesTarget.from_introspection(info, gpus=target.gpus)
    seen = {(f.rule, f.message) for f in findings}
    for finding in _rules(preset, model, installed):
        if (finding.rule, finding.message) not in seen:
            out["new_findings"].append(finding.to_dict())
    return out


def _emit(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report, indent=1))
        return
    echo = typer.echo
    echo(f"Preset file: {report['file']}")
    errors, warnings = report["schema_errors"], report["schema_warnings"]
    if errors:
        echo(f"Schema: {len(errors)} error(s)")
        for line in errors:
            echo(f"  {line}")
        return
    echo(f"Schema: OK ({len(warnings)} warning(s))")
    for line in warnings:
        echo(f"  {line}")
    tgt = report["target"]
    echo(
        f"Target: vLLM {tgt['vllm_version'] or '(unknown)'} on {tgt['platform'] or '(unknown)'}, "
        f"{tgt['gpus']} GPU(s) ({'from the preset' if tgt['note'] == 'preset' else 'given'})"
    )
    if report.get("model_note"):
        echo(f"  note: {report['model_note']}")
    _echo_findings(report["findings"], "Rules on the target")
    installed = report.get("installed")
    if not installed:
        return
    if not installed["available"]:
        echo(f"Installed vLLM: {installed['note']}")
        return
    here = f"vLLM {installed['vllm_version']} on {installed['platform']}"
    if installed["same_as_target"]:
        echo(f"Installed: {here}, the same as the target.")
        return
    echo(f"Installed: {here}, which differs from the target:")
    if not installed["knobs"] and not installed["new_findings"]:
        echo("  no difference for this preset's knobs.")
    for item in installed["knobs"]:
        echo(f"  - {item['reason'] or item['key'] + ': ' + item['status']}")
    _echo_findings(installed["new_findings"], "  Findings only on the installed vLLM", indent="  ")


def _echo_findings(findings: list[dict[str, Any]], title: str, indent: str = "") -> None:
    counts = {
        s: sum(1 for f in findings if f["severity"] == s) for s in ("error", "warning", "advice")
    }
    if not findings:
        if not indent:
            typer.echo(f"{title}: no findings.")
        return
    typer.echo(
        f"{title}: {counts['error']} error(s), {counts['warning']} warning(s), {counts['advice']} advice"
    )
    for f in findings:
        typer.echo(f"{indent}  [{f['severity']}] {f['message']} ({f['rule']}; {f['source']})")
        if f.get("fix"):
            fix = " ".join(f"{k}={'(unset)' if v is None else v}" for k, v in f["fix"].items())
            typer.echo(f"{indent}      fix: {fix}")
