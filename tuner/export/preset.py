"""The preset: a config plus what it was tuned for and measured with, as TOML.

Schema version 1 (documented in ``docs/presets.md``) has a ``[preset]`` table
(name, description, schema version, tunelab version, creation time), a
``[target]`` table (model, vLLM version, platform, GPU name and count,
driver), ``[env]`` with the exact variables, ``[engine]`` with the engine
arguments as typed TOML values (the compilation config as a table), optional
``[workload]`` and ``[results]`` for presets exported from a trial, and
``[provenance]`` (reference sections, trial id, config id). The keys of
``[env]`` and ``[engine]`` are the knob catalogue's keys, the same that
``--set KEY=VALUE`` takes. Files are read with ``tomllib`` and written with
``tomli-w``; export then import gives back the identical config (equal
``config_id``), which a property test checks over hostile strings.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import tomli_w

from tuner.bounded import InputTooLargeError, NotAFileError, read_bytes
from tuner.config import EngineConfig
from tuner.demo_model import demo_model_dir, ensure_demo_model
from tuner.export.env_policy import split_secrets
from tuner.export.errors import Issue, PresetError
from tuner.export.quoting import comment_text
from tuner.export.schema import (
    DEMO_MODEL_PLACEHOLDER,
    MAX_PRESET_BYTES,
    SCHEMA_VERSION,
    Preset,
    PresetTarget,
    Provenance,
)
from tuner.export.validate import check_writable, validate_text

__all__ = [
    "DEMO_MODEL_PLACEHOLDER",
    "MAX_PRESET_BYTES",
    "SCHEMA_VERSION",
    "Preset",
    "PresetTarget",
    "Provenance",
    "dump_preset",
    "load_preset",
    "loads_preset",
    "model_placeholder",
    "now_iso",
    "preset_from_config",
    "preset_to_dict",
    "read_preset_text",
    "resolve_model",
]


def now_iso() -> str:
    """The current UTC time, to the second, as ISO 8601 with a ``Z``."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def resolve_model(model: str) -> str:
    """Turns a ``tunelab:`` placeholder into a real model path; other ids pass through.

    Raises:
        PresetError: for an unknown ``tunelab:`` placeholder.
    """
    if model == DEMO_MODEL_PLACEHOLDER:
        return str(ensure_demo_model())
    if model.startswith("tunelab:"):
        raise PresetError(
            "<preset>",
            [
                Issue(
                    "target.model",
                    f"unknown tunelab model placeholder {model!r}",
                    f"use {DEMO_MODEL_PLACEHOLDER!r} for the embedded demo model, or a model id/path",
                )
            ],
        )
    return model


def model_placeholder(model: str) -> str:
    """The text to write for ``model``: the placeholder for the demo model's directory."""
    if model == DEMO_MODEL_PLACEHOLDER or model == str(demo_model_dir()):
        return DEMO_MODEL_PLACEHOLDER
    return model


def preset_from_config(
    config: EngineConfig,
    name: str,
    *,
    description: str = "",
    target: PresetTarget | None = None,
    workload: dict[str, Any] | None = None,
    results: dict[str, Any] | None = None,
    provenance: Provenance | None = None,
    created: str | None = None,
) -> Preset:
    """Wraps a config as a preset, recording its config id for provenance.

    Args:
        config: The config to export.
        name: Preset name (letters, digits, ``.``, ``_``, ``-``).
        description: What it is for.
        target: Tuning target; its model is replaced by the config's model.
        workload: Measured workload (trial exports).
        results: Measured results (trial exports).
        provenance: Sources and trial id; ``config_id`` is filled in here.
        created: Creation time; now if None.
    """
    tgt = target or PresetTarget(model=config.model)
    tgt = PresetTarget(
        model=model_placeholder(config.model),
        vllm_version=tgt.vllm_version,
        platform=tgt.platform,
        gpu_name=tgt.gpu_name,
        gpu_count=tgt.gpu_count,
        driver=tgt.driver,
    )
    prov = provenance or Provenance()
    # The id of the config as written: secrets are never written, so they
    # are not part of it either.
    written = EngineConfig(
        model=config.model, env=split_secrets(config.env)[0], engine=config.engine
    )
    prov = Provenance(
        sources=list(prov.sources),
        trial_id=prov.trial_id,
        config_id=written.config_id,
        notes=prov.notes,
    )
    return Preset(
        name=name,
        config=config,
        target=tgt,
        description=description,
        created=created or now_iso(),
        workload=workload,
        results=results,
        provenance=prov,
    )


def preset_to_dict(preset: Preset) -> dict[str, Any]:
    """The TOML document as nested dicts (None values left out; TOML has no null)."""
    env, _secrets = split_secrets(preset.config.env_vars())
    doc: dict[str, Any] = {
        "preset": _drop_none(
            {
                "name": preset.name,
                "description": preset.description,
                "schema_version": preset.schema_version,
                "tunelab_version": preset.tunelab_version,
                "created": preset.created or None,
            }
        ),
        "target": _drop_none(
            {
                "model": preset.target.model,
                "vllm_version": preset.target.vllm_version,
                "platform": preset.target.platform,
                "gpu_name": preset.target.gpu_name,
                "gpu_count": preset.target.gpu_count,
                "driver": preset.target.driver,
            }
        ),
        "env": env,
        "engine": dict(sorted(preset.config.engine.items())),
    }
    if preset.workload is not None:
        doc["workload"] = preset.workload
    if preset.results is not None:
        doc["results"] = preset.results
    prov = _drop_none(
        {
            "sources": list(preset.provenance.sources) or None,
            "trial_id": preset.provenance.trial_id,
            "config_id": preset.provenance.config_id,
            "notes": preset.provenance.notes,
        }
    )
    if prov:
        doc["provenance"] = prov
    return doc


def dump_preset(preset: Preset) -> str:
    """The preset as TOML text, with a short header comment.

    Secrets in the config's environment are left out (they never go into a
    file); use :func:`tuner.export.env_policy.split_secrets` beforehand to tell
    the user which.

    Raises:
        PresetError: when a value cannot be written as TOML (a null inside the
            compilation config, a NUL byte, an integer beyond 64 bits).
    """
    doc = preset_to_dict(preset)
    issues = check_writable(doc)
    if issues:
        raise PresetError(preset.name, issues)
    notes = "".join(f"{line}\n" for line in ran_notes(preset))
    header = (
        f"# tunelab preset (schema {SCHEMA_VERSION}): {_one_line(preset.name)}\n"
        "# Check it:  tunelab presets check FILE\n"
        "# Launch it: tunelab export --preset FILE --format sh  (then run the .sh)\n"
        f"{notes}\n"
    )
    return header + tomli_w.dumps(doc)


def ran_notes(preset: Preset) -> list[str]:
    """Comment lines naming each request vLLM overrode when this preset was measured, and the
    kernel shapes AITER ran untuned (``[results.aiter_untuned]``, issue 29).

    From ``[results.ran]`` (tuner.export.trial): the exported files keep the
    request, so whoever launches one is told what the measurement really ran.
    """
    results = preset.results or {}
    untuned = results.get("aiter_untuned")
    lines = []
    if isinstance(untuned, dict) and untuned.get("summary"):
        # Issue 29: figures measured on AITER's default kernels for some shapes.
        text = f"NOTE: measured while {untuned['summary']}"
        lines.append(f"# {comment_text(text, limit=160)}")
    ran = results.get("ran")
    if not isinstance(ran, dict):
        return lines
    for knob, row in ran.items():
        if not isinstance(row, dict):
            continue
        text = (
            f"NOTE: measured with vLLM {row.get('vllm') or '(unknown version)'}, which ran "
            f"{knob}={row.get('ran')} where this preset asks {row.get('requested')}"
        )
        lines.append(f"# {comment_text(text, limit=160)}")
    return lines


def loads_preset(
    text: str,
    *,
    source: str = "<preset>",
    allow_env: tuple[str, ...] | frozenset[str] = (),
    resolve: bool = True,
    allow_code: bool = False,
) -> Preset:
    """Parses and validates preset TOML text.

    Args:
        text: The TOML document.
        source: File name for messages.
        allow_env: Variable names the user explicitly allowed (``--allow-env``).
        resolve: Resolve ``tunelab:demo`` to the demo model's directory
            (builds it if missing); False keeps the placeholder as the model.
        allow_code: Accept engine arguments that load or run code (the user's
            ``--allow-code``); without it each one is an error naming it.

    Raises:
        PresetError: with every schema problem, each naming its key and line.
    """
    result = validate_text(text, source=source, allow_env=allow_env, allow_code=allow_code)
    if result.preset is None:
        raise PresetError(source, result.errors)
    preset = result.preset
    if resolve:
        try:
            model = resolve_model(preset.target.model)
        except PresetError as exc:
            raise PresetError(source, [_with_line(i, result.lines) for i in exc.issues]) from None
        preset.config = EngineConfig(
            model=model, env=preset.config.env, engine=preset.config.engine
        )
    return preset


def read_preset_text(path: str | Path) -> str:
    """The text of a preset file: at most 1 MiB of UTF-8.

    Raises:
        PresetError: for a missing/unreadable/oversized/non-UTF-8 file.
    """
    path = Path(path)
    source = str(path)
    try:
        data = read_bytes(path, max_bytes=MAX_PRESET_BYTES, what="preset")
    except InputTooLargeError:
        raise PresetError(
            source,
            [
                Issue(
                    "",
                    f"the file is larger than {MAX_PRESET_BYTES // 1024} KiB; a preset is a few KiB",
                    "check that this is a tunelab preset",
                )
            ],
        ) from None
    except NotAFileError as exc:
        raise PresetError(source, [Issue("", exc.message, exc.fix or "")]) from None
    except OSError as exc:
        raise PresetError(
            source, [Issue("", f"cannot read the file ({exc.strerror or exc})", "check the path")]
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PresetError(
            source,
            [Issue("", "the file is not UTF-8 text", "save it as UTF-8", line=line)],
        ) from None


def load_preset(
    path: str | Path,
    *,
    allow_env: tuple[str, ...] | frozenset[str] = (),
    resolve: bool = True,
    allow_code: bool = False,
) -> Preset:
    """Reads a preset file (at most 1 MiB of UTF-8 TOML) and validates it.

    Raises:
        PresetError: for a missing/unreadable/oversized/non-UTF-8 file or any
            schema problem.
    """
    text = read_preset_text(path)
    return loads_preset(
        text, source=str(path), allow_env=allow_env, resolve=resolve, allow_code=allow_code
    )


def _with_line(issue: Issue, lines: dict[tuple[str, ...], int]) -> Issue:
    line = lines.get(tuple(issue.key.split("."))) if issue.key else None
    return Issue(issue.key, issue.message, issue.fix, line, issue.severity)


def _drop_none(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if v is not None}


def _one_line(text: str) -> str:
    return comment_text(text, limit=80)
