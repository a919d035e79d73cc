"""Export: one preset or config rendered to every requested format, all or nothing.

All texts are rendered and checked before the first byte is written: the
TOML is read back through the same validation as ``--preset`` and must give
the identical config (equal ``config_id``), so a file that would not load, or
would load as something else, is never written. Existing files are refused
up front unless ``force`` is given; if a write still fails midway, the files
this call created are removed again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from tuner.config import EngineConfig
from tuner.export.docker import render_docker, target_summary
from tuner.export.env_policy import split_secrets
from tuner.export.errors import ExportError, PresetError
from tuner.export.files import check_base_name, write_all
from tuner.export.preset import (
    DEMO_MODEL_PLACEHOLDER,
    MAX_PRESET_BYTES,
    Preset,
    dump_preset,
    loads_preset,
    model_placeholder,
    preset_from_config,
    ran_notes,
)
from tuner.export.quoting import QuotingError
from tuner.export.script import header_lines, render_script
from tuner.export.yaml_config import render_yaml
from tuner.policy import Consent, violations

FORMATS: dict[str, str] = {
    "toml": ".toml",
    "sh": ".sh",
    "yaml": ".yaml",
    "docker": ".docker.sh",
}
EXECUTABLE = frozenset({"sh", "docker"})


def parse_formats(text: str | Iterable[str]) -> list[str]:
    """``"toml,sh"`` (or a list) to a checked, de-duplicated list of formats.

    Raises:
        ExportError: for an unknown format, naming the known ones.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for raw in items:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in FORMATS:
            raise ExportError(f"unknown format {raw.strip()!r}; choose from {', '.join(FORMATS)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ExportError(f"no format given; choose from {', '.join(FORMATS)}")
    return out


def safe_name(text: str) -> str:
    """A file-name-safe version of a preset name."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")[:64]
    return name or "preset"


def as_preset(source: Preset | EngineConfig, name: str | None = None) -> Preset:
    """A preset for ``source``; a bare config gets ``name`` or ``config-<id>``."""
    if isinstance(source, Preset):
        return source
    return preset_from_config(source, safe_name(name or f"config-{source.config_id}"))


def render_texts(
    preset: Preset,
    formats: Iterable[str],
    *,
    allow_env: Iterable[str] = (),
    allow_code: bool = False,
) -> dict[str, str]:
    """Renders each format's text for ``preset`` (nothing written).

    What the policy refuses (:mod:`tuner.policy`: code-loading arguments, variables
    not known to be data, secrets inside JSON values) is never exported silently:
    without the user's consent it stops the export, each one named. Secret
    variables are left out of every file instead (the shell supplies them).

    Raises:
        ExportError: when the preset cannot be exported faithfully (a value
            TOML cannot hold, a NUL byte, a refused environment variable, or a
            TOML that would not read back as the same config).
    """
    config = preset.config
    consent = Consent.of(code=allow_code, env=allow_env)
    refused = [
        v for v in violations(config, consent) if not (v.kind == "secret" and v.table == "env")
    ]
    if refused:
        names = "; ".join(v.message for v in refused)
        raise ExportError(
            f"{preset.name}: refusing to export what tunelab's policy refuses ({names})",
            fix=refused[0].fix,
        )
    _check_sizes(config)
    header = header_lines(
        preset_name=preset.name,
        description=preset.description,
        trial_id=preset.provenance.trial_id,
        config_id=config.config_id,
        created=preset.created or "an unknown date",
        target=target_summary(
            preset.target.platform,
            preset.target.gpu_name,
            preset.target.gpu_count,
            preset.target.vllm_version,
        ),
    )
    header += ran_notes(preset)
    texts: dict[str, str] = {}
    try:
        for fmt in parse_formats(list(formats)):
            if fmt == "toml":
                texts[fmt] = _checked_toml(preset, allow_env)
            elif fmt == "sh":
                texts[fmt] = render_script(config, header)
            elif fmt == "yaml":
                texts[fmt] = render_yaml(config, header)
            else:
                texts[fmt] = render_docker(
                    config, header, preset.target.platform, preset.target.vllm_version
                )
    except PresetError as exc:
        raise ExportError(str(exc)) from None
    except QuotingError as exc:
        raise ExportError(f"cannot export {preset.name}: {exc}") from None
    return texts


# Linux refuses a single argv or environment string of 32 pages or more
# (MAX_ARG_STRLEN, 128 KiB): exec fails with "Argument list too long".
MAX_ARG_BYTES = 128 * 1024 - 1


def _check_sizes(config: EngineConfig) -> None:
    """Refuses values no process could be started with, before anything is written."""
    items = [*config.serve_args(), *(f"{k}={v}" for k, v in config.env_vars().items())]
    for item in items:
        size = len(item.encode("utf-8", "surrogatepass"))
        if size > MAX_ARG_BYTES:
            raise ExportError(
                f"an argument or variable is {size // 1024} KiB ({item[:40]!r}...); Linux "
                "starts no process with one over 128 KiB (Argument list too long): shorten it"
            )


def _checked_toml(preset: Preset, allow_env: Iterable[str]) -> str:
    """The TOML text, verified to load back as the same config."""
    text = dump_preset(preset)
    if len(text.encode("utf-8")) > MAX_PRESET_BYTES:
        raise ExportError(
            f"{preset.name}: the preset would be {len(text.encode()) // 1024} KiB, over the "
            f"{MAX_PRESET_BYTES // 1024} KiB that `--preset` reads; shorten its values"
        )
    # Code-loading arguments were refused (or explicitly allowed) above.
    loaded = loads_preset(
        text,
        source=f"{preset.name}.toml",
        allow_env=tuple(allow_env),
        resolve=False,
        allow_code=True,
    )
    expected = EngineConfig(
        model=model_placeholder(preset.config.model),
        env=split_secrets(preset.config.env)[0],
        engine=preset.config.engine,
    )
    if loaded.config.config_id != expected.config_id:
        raise ExportError(
            f"{preset.name}: the TOML would load as a different config "
            f"({loaded.config.config_id} instead of {expected.config_id}); this is a bug in "
            "tunelab, please report it with the config"
        )
    if loaded.target.model != DEMO_MODEL_PLACEHOLDER and loaded.target.model != preset.config.model:
        raise ExportError(f"{preset.name}: the model would not read back unchanged")
    return text


def export(
    source: Preset | EngineConfig,
    out_dir: str | Path,
    formats: Iterable[str] = ("toml", "sh", "yaml", "docker"),
    force: bool = False,
    *,
    name: str | None = None,
    allow_env: Iterable[str] = (),
    allow_code: bool = False,
    extra: Sequence[tuple[str, str, int]] = (),
) -> list[Path]:
    """Writes ``source`` in each format into ``out_dir``; returns the paths written.

    Args:
        source: A preset, or a bare config (wrapped as a preset named ``name``).
        out_dir: Directory to write into (created if missing).
        formats: Any of ``toml``, ``sh``, ``yaml``, ``docker``.
        force: Overwrite existing files.
        name: File base name (default: the preset's name).
        allow_env: Environment variable names the user explicitly allowed.
        allow_code: Export engine arguments that load code (``--allow-code``).
        extra: More files of the same bundle, ``(suffix, text, mode)``: written with
            the others, all or none (the AITER untuned-shape CSVs of a trial).

    Raises:
        ExportError: nothing is left half-written; files created by this call
            before a failure are removed again.
    """
    preset = as_preset(source, name)
    base = safe_name(name or preset.name)
    # prod.docker.sh is prod's docker script: refused (and likewise for the extra files).
    check_base_name(base, {**FORMATS, **{suffix: suffix for suffix, _t, _m in extra}})
    texts = render_texts(preset, formats, allow_env=allow_env, allow_code=allow_code)
    directory = Path(out_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {directory}: {exc.strerror or exc}") from None
    targets = {fmt: directory / f"{base}{FORMATS[fmt]}" for fmt in texts}
    files: list[tuple[Path, str | bytes, int]] = [
        (path, texts[fmt], 0o755 if fmt in EXECUTABLE else 0o644) for fmt, path in targets.items()
    ]
    files += [(directory / f"{base}{suffix}", text, mode) for suffix, text, mode in extra]
    if not force:
        existing = [str(p) for p, _text, _mode in files if p.exists()]
        if existing:
            raise ExportError(
                f"{', '.join(existing)} already exist(s); pass --force to overwrite, or choose --out"
            )
    return write_all(files, force=force)


def dropped_secrets(source: Preset | EngineConfig) -> list[str]:
    """Names of secret variables an export leaves out (to tell the user)."""
    config = source.config if isinstance(source, Preset) else source
    return split_secrets(config.env)[1]
