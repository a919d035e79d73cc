"""``tunelab knobs``: the knob catalogue for a target vLLM, as a table or JSON.

The target is the installed vLLM (introspected in a subprocess, cached) unless
``--vllm-version`` / ``--platform`` name another one, for planning a preset
for a different machine. Each knob is marked available, removed (with its
replacement), not yet present, or without effect on the platform. Where the
installed vLLM was introspected, its answer wins over the catalogue's.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tuner import knobs
from tuner.cli.check_options import PlatformName
from tuner.introspect import IntrospectError, introspect
from tuner.introspect_compare import VALUE_SET_FIELDS, knob_availability
from tuner.knobs import choices_for
from tuner.knobs.versions import parse_version

if TYPE_CHECKING:
    from tuner.introspect import VllmInfo
    from tuner.knobs import Knob


def register(app: typer.Typer) -> None:
    """Add the ``knobs`` command to the tunelab CLI."""
    app.command("knobs")(knobs_command)


def knobs_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    vllm_version: Annotated[
        str | None,
        typer.Option("--vllm-version", help="Target vLLM version (default: the installed one)."),
    ] = None,
    platform: Annotated[
        PlatformName | None,
        typer.Option("--platform", help="Target platform (default: the installed vLLM's)."),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", help="Only this group (aiter, attention, batching, ...)."),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option("--python", help="Interpreter whose vLLM to introspect (default: this one)."),
    ] = None,
) -> None:
    """List every knob tunelab knows, for the target vLLM version and platform."""
    if vllm_version is not None:
        try:
            parse_version(vllm_version)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--vllm-version") from None
    groups = knobs.groups()
    if group is not None and group not in groups:
        raise typer.BadParameter(
            f"unknown group {group!r}; groups: {', '.join(groups)}", param_hint="--group"
        )

    info, info_note = _introspect_if_needed(vllm_version, platform, python)
    version = vllm_version or (info.version if info else None)
    plat = platform.value if platform else (info.platform if info else None)
    # Introspection only speaks for the version that is installed.
    use_info = info if info and info.available and (version == info.version) else None

    rows = [
        _row(knob, version, plat, use_info)
        for name, items in groups.items()
        if group is None or name == group
        for knob in items
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    _print_table(rows, version, plat, use_info, info_note)


def _introspect_if_needed(
    version: str | None, platform: PlatformName | None, python: str | None
) -> tuple[VllmInfo | None, str]:
    """Introspects the installed vLLM unless the target is fully given."""
    if version is not None and platform is not None:
        return None, "given"

    try:
        info = introspect(python or sys.executable)
    except IntrospectError as exc:
        return None, f"introspection failed: {exc}"
    if not info.available:
        return info, f"no vLLM: {info.error}"
    return info, f"introspected from {info.python}" + (" (cached)" if info.from_cache else "")


def _row(
    knob: Knob, version: str | None, platform: str | None, info: VllmInfo | None
) -> dict[str, Any]:

    verdict = knob_availability(knob, version, platform, info)
    choices = _installed_choices(knob, info) or choices_for(knob, version)
    return {
        "key": knob.key,
        "kind": str(knob.kind),
        "type": str(knob.type),
        "group": knob.group,
        "help": knob.help,
        "default": knob.default,
        "choices": list(choices),
        "minimum": knob.minimum,
        "maximum": knob.maximum,
        "platforms": [str(p) for p in knob.platforms],
        "since": knob.since,
        "until": knob.until,
        "replacement": knob.replacement,
        "source": knob.cited_source,
        "source_file": knob.source,
        **verdict.to_dict(),
    }


def _installed_choices(knob: Knob, info: VllmInfo | None) -> tuple[str, ...] | None:

    name = knob.extra.get("value_set")
    if info is None or not name:
        return None
    installed: tuple[str, ...] | None = getattr(info, VALUE_SET_FIELDS[name])
    return installed


_STATUS_STYLE = {
    "available": "green",
    "removed": "red",
    "not-yet": "yellow",
    "not-applicable": "dim",
}


def _print_table(
    rows: list[dict[str, Any]],
    version: str | None,
    platform: str | None,
    info: VllmInfo | None,
    info_note: str,
) -> None:

    console = Console()
    target = f"vLLM {version or '(version unknown)'} on {platform or '(platform unknown)'}"
    console.print(f"[bold]Target:[/] {target} — {info_note}")
    table = Table(show_lines=False, header_style="bold")
    for column in ("Knob", "Kind", "Values", "Default", "Status", "Help"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = _STATUS_STYLE.get(row["status"], "")
        status = row["status"]
        if row["status"] == "removed" and row["replacement"]:
            status += f" → {row['replacement']}"
        if row["note"]:
            status += f" ({row['note']})"
        table.add_row(
            row["key"],
            row["kind"],
            _values_text(row),
            "" if row["default"] is None else str(row["default"]),
            f"[{style}]{status}[/]" if style else status,
            row["help"],
        )
    console.print(table)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()))


def _values_text(row: dict[str, Any]) -> str:
    if row["choices"]:
        if len(row["choices"]) > 6:
            return f"{len(row['choices'])} values"
        return "|".join(row["choices"])
    low, high = row["minimum"], row["maximum"]
    if low is not None and high is not None:
        return f"{row['type']} {low:g}–{high:g}"
    if low is not None:
        return f"{row['type']} ≥ {low:g}"
    if high is not None:
        return f"{row['type']} ≤ {high:g}"
    kind: str = row["type"]
    return kind
