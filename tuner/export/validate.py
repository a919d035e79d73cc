"""Schema validation of preset files: every mistake named by key and line, with a fix.

A preset is input from outside (shared files, hand edits), so it is checked
before anything uses it: known tables and keys only, the right TOML types for
each field, knob values typed by the knob catalogue (``tuner.knobs``), the
environment limited by :mod:`tuner.export.env_policy`, no NUL bytes, bounded
size and nesting. All problems are collected, not just the first, and each
one names its dotted key and the line where that key is written.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tuner.config import (
    ConfigError,
    EngineConfig,
)
from tuner.export.errors import Issue, IssueCollector, describe
from tuner.export.knob_values import check_engine_table, check_env_table
from tuner.export.schema import (
    DEMO_MODEL_PLACEHOLDER,
    SCHEMA_VERSION,
    Preset,
    PresetTarget,
    Provenance,
)
from tuner.export.toml_lines import key_lines

MAX_DEPTH = 8
MAX_INT = 2**63 - 1
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PLATFORMS = ("rocm", "cuda", "cpu")
TABLES = ("preset", "target", "env", "engine", "workload", "results", "provenance")

_PRESET_FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "name": ((str,), True, 'name = "dense-throughput"'),
    "description": ((str,), False, 'description = "what it is for"'),
    "schema_version": ((int,), True, f"schema_version = {SCHEMA_VERSION}"),
    "tunelab_version": ((str,), False, 'tunelab_version = "0.1.0"'),
    "created": ((str, dt.datetime, dt.date), False, 'created = "2026-01-31T12:00:00Z"'),
}
_TARGET_FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "model": ((str,), True, 'model = "meta-llama/Llama-3.1-8B-Instruct"'),
    "vllm_version": ((str,), False, 'vllm_version = "0.11.0"'),
    "platform": ((str,), False, 'platform = "rocm"'),
    "gpu_name": ((str,), False, 'gpu_name = "AMD Instinct MI300X"'),
    "gpu_count": ((int,), False, "gpu_count = 8"),
    "driver": ((str,), False, 'driver = "ROCm 6.4.1"'),
}
_PROVENANCE_FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "sources": ((list, str), False, 'sources = ["000_cadfc2653427814e.txt §Quantization support"]'),
    "trial_id": ((str,), False, 'trial_id = "t-20260131-0001"'),
    "config_id": ((str,), False, 'config_id = "0123456789ab"'),
    "notes": ((str,), False, 'notes = "..."'),
}


@dataclass
class ValidationResult:
    """The outcome of validating a preset text.

    Attributes:
        preset: The preset when there were no errors, else None.
        errors: Problems that block loading.
        warnings: Things worth knowing that do not block loading.
        lines: Key path to line number, for later messages about the same file.
    """

    preset: Preset | None
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)


def validate_text(
    text: str,
    *,
    source: str = "<preset>",
    allow_env: Iterable[str] = (),
    allow_code: bool = False,
) -> ValidationResult:
    """Validates preset TOML text and builds the :class:`Preset` when it is valid.

    The model stays as written (``tunelab:demo`` unresolved); loading resolves it.

    Args:
        text: The TOML document.
        source: File name for messages.
        allow_env: Variable names explicitly allowed by the user.
        allow_code: Accept engine arguments that load or run code (``--allow-code``).
    """
    del source  # messages are formatted by the caller with the file name
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        return ValidationResult(
            None, [Issue("", "the file contains a NUL byte", "remove it; presets are text", line)]
        )
    lines = key_lines(text)
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        # tomllib recurses per nesting level; a hostile file can nest deeper
        # than Python's stack allows long before the size limit.
        return ValidationResult(
            None,
            [
                Issue(
                    "",
                    "the file nests tables or arrays too deeply to be a preset",
                    "a preset has at most a few levels ([engine.compilation-config] ...); "
                    "remove the nesting",
                    None,
                )
            ],
            lines=lines,
        )
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        error_line = int(match.group(1)) if match else None
        return ValidationResult(
            None,
            [
                Issue(
                    "",
                    f"not valid TOML: {exc}",
                    "check quotes, brackets and '=' on that line (strings need quotes: "
                    'key = "text")',
                    error_line,
                )
            ],
            lines=lines,
        )
    out = IssueCollector(lines)
    _check_structure(doc, out)
    # Tables that are not tables were reported; check the rest all the same
    # so the user sees every problem in one go.
    doc = {k: v for k, v in doc.items() if k in TABLES and isinstance(v, dict)}
    preset = _build(doc, out, frozenset(allow_env), allow_code)
    if out.errors:
        return ValidationResult(None, out.errors, out.warnings, lines)
    return ValidationResult(preset, [], out.warnings, lines)


def _check_structure(doc: dict[str, Any], out: IssueCollector) -> None:
    """Top-level tables, nesting depth, NUL bytes and integer range."""
    for key, value in doc.items():
        if key not in TABLES:
            close = difflib.get_close_matches(key, TABLES, n=1)
            hint = f"did you mean [{close[0]}]? " if close else ""
            out.error(
                (key,), f"unknown table or key {key!r}", f"{hint}known tables: {', '.join(TABLES)}"
            )
        elif not isinstance(value, dict):
            out.error((key,), f"{key} must be a table", f"write it as a [{key}] section")
    for name in ("preset", "target"):
        if name not in doc:
            out.error(
                (),
                f"the [{name}] table is missing",
                f"add a [{name}] section (see docs/presets.md)",
            )
    _walk((), doc, 0, out)


def _walk(path: tuple[str, ...], value: Any, depth: int, out: IssueCollector) -> None:
    if depth > MAX_DEPTH:
        out.error(path, f"nested deeper than {MAX_DEPTH} levels", "flatten the table")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                out.error(path, "a key contains a NUL byte", "remove it")
            _walk((*path, key), item, depth + 1, out)
    elif isinstance(value, list):
        for item in value:
            _walk(path, item, depth + 1, out)
    elif isinstance(value, str) and "\x00" in value:
        out.error(
            path, "the value contains a NUL byte (\\u0000)", "remove it; no process can receive it"
        )


def _fields(
    table: dict[str, Any],
    spec: dict[str, tuple[tuple[type, ...], bool, str]],
    name: str,
    out: IssueCollector,
    present: Iterable[str],
) -> dict[str, Any]:
    """Checks a fixed-schema table; returns the well-typed fields."""
    good: dict[str, Any] = {}
    for key, value in table.items():
        if key not in spec:
            close = difflib.get_close_matches(key, list(spec), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            out.error(
                (name, key),
                f"unknown key {key!r} in [{name}]",
                f"{hint}known keys: {', '.join(spec)}",
            )
            continue
        types, _required, example = spec[key]
        if isinstance(value, bool) and bool not in types:
            out.error(
                (name, key), f"{key} must be {_names(types)}, not a boolean", f"write {example}"
            )
        elif not isinstance(value, types):
            out.error(
                (name, key),
                f"{key} must be {_names(types)}, not {describe(value)}",
                f"write {example}",
            )
        else:
            good[key] = value
    if name not in present:
        return good  # a missing table was reported once, as a whole
    for key, (_types, required, example) in spec.items():
        if required and key not in table:
            out.error((name,), f"[{name}] has no {key}", f"add {example}")
    return good


def _build(
    doc: dict[str, Any], out: IssueCollector, allow_env: frozenset[str], allow_code: bool
) -> Preset | None:
    head = _fields(doc.get("preset", {}), _PRESET_FIELDS, "preset", out, doc)
    tgt = _fields(doc.get("target", {}), _TARGET_FIELDS, "target", out, doc)
    prov = _fields(doc.get("provenance", {}), _PROVENANCE_FIELDS, "provenance", out, ())
    _check_head(head, out)
    _check_target(tgt, out)
    env = check_env_table(doc.get("env", {}), out, allow_env)
    engine = check_engine_table(doc.get("engine", {}), out, allow_code)
    sources = prov.get("sources", [])
    if isinstance(sources, str):
        sources = [sources]
    if not all(isinstance(s, str) for s in sources):
        out.error(
            ("provenance", "sources"),
            "sources must be a list of strings",
            'write sources = ["file §section"]',
        )
    if out.errors:
        return None
    try:
        config = EngineConfig(model=tgt["model"], env=env, engine=engine)
        config.serve_args()
    except ConfigError as exc:
        out.error(("engine",), str(exc), "fix the value named above")
        return None
    created = head.get("created", "")
    if isinstance(created, dt.datetime | dt.date):
        created = created.isoformat()
    provenance = Provenance(
        sources=list(sources),
        trial_id=prov.get("trial_id"),
        config_id=prov.get("config_id"),
        notes=prov.get("notes"),
    )
    recorded = provenance.config_id
    if recorded and not tgt["model"].startswith("tunelab:") and recorded != config.config_id:
        out.warn(
            ("provenance", "config_id"),
            f"the config differs from the one exported (config id {config.config_id}, recorded {recorded})",
            "the file was edited after export; re-measure before trusting its [results]",
        )
    return Preset(
        name=head["name"],
        config=config,
        target=PresetTarget(
            model=tgt["model"],
            vllm_version=tgt.get("vllm_version"),
            platform=tgt.get("platform"),
            gpu_name=tgt.get("gpu_name"),
            gpu_count=tgt.get("gpu_count"),
            driver=tgt.get("driver"),
        ),
        description=head.get("description", ""),
        schema_version=head["schema_version"],
        tunelab_version=head.get("tunelab_version", ""),
        created=str(created),
        workload=doc.get("workload"),
        results=doc.get("results"),
        provenance=provenance,
    )


def _check_head(head: dict[str, Any], out: IssueCollector) -> None:
    name = head.get("name")
    if isinstance(name, str) and not NAME_RE.match(name):
        out.error(
            ("preset", "name"),
            f"name {name!r} is not usable as a file name",
            "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    version = head.get("schema_version")
    if isinstance(version, int) and version != SCHEMA_VERSION:
        if version > SCHEMA_VERSION:
            out.error(
                ("preset", "schema_version"),
                f"schema version {version} is newer than this tunelab understands ({SCHEMA_VERSION})",
                "upgrade tunelab",
            )
        else:
            out.error(
                ("preset", "schema_version"),
                f"schema version {version} does not exist",
                f"write schema_version = {SCHEMA_VERSION}",
            )


def _check_target(tgt: dict[str, Any], out: IssueCollector) -> None:
    model = tgt.get("model")
    if isinstance(model, str) and not model.strip():
        out.error(
            ("target", "model"), "model is empty", 'write a model id, a path, or "tunelab:demo"'
        )
    elif (
        isinstance(model, str) and model.startswith("tunelab:") and model != DEMO_MODEL_PLACEHOLDER
    ):
        out.error(
            ("target", "model"),
            f"unknown tunelab model placeholder {model!r}",
            f'use "{DEMO_MODEL_PLACEHOLDER}" for the embedded demo model',
        )
    platform = tgt.get("platform")
    if isinstance(platform, str) and platform not in PLATFORMS:
        out.error(
            ("target", "platform"),
            f"unknown platform {platform!r}",
            f"use one of {', '.join(PLATFORMS)}",
        )
    count = tgt.get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool) and count < 0:
        out.error(
            ("target", "gpu_count"),
            "gpu_count cannot be negative",
            "write 0 for CPU, else the GPU count",
        )


def check_writable(doc: dict[str, Any]) -> list[Issue]:
    """Problems that stop a document from being written as TOML (nulls, NUL, huge ints, depth)."""
    issues: list[Issue] = []

    def walk(path: tuple[str, ...], value: Any, depth: int) -> None:
        where = ".".join(path)
        if depth > MAX_DEPTH:
            issues.append(Issue(where, f"nested deeper than {MAX_DEPTH} levels", "flatten it"))
        elif value is None:
            issues.append(
                Issue(
                    where, "TOML has no null value", "remove the key instead of setting it to null"
                )
            )
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    issues.append(Issue(where, f"key {key!r} is not a string", "use string keys"))
                walk((*path, str(key)), item, depth + 1)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(path, item, depth + 1)
        elif isinstance(value, str):
            if "\x00" in value:
                issues.append(Issue(where, "the value contains a NUL byte", "remove it"))
        elif isinstance(value, bool | float | dt.date | dt.time):
            pass
        elif isinstance(value, int):
            if not -MAX_INT - 1 <= value <= MAX_INT:
                issues.append(
                    Issue(where, "the integer does not fit in 64 bits", "use a smaller number")
                )
        else:
            issues.append(
                Issue(
                    where,
                    f"cannot write {describe(value)} as TOML",
                    "use a string, number, boolean or table",
                )
            )

    walk((), doc, 0)
    return issues


def _names(types: tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        list: "a list",
        dt.datetime: "a date-time",
        dt.date: "a date",
        bool: "a boolean",
    }
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))
