"""Where presets live and how to find one by name.

Shipped presets are the TOML files in the repository's ``presets/``
directory (found next to the ``tuner`` package, or in
``<prefix>/share/tunelab/presets`` for an installed wheel, or wherever
``TUNELAB_PRESETS_DIR`` points). A user's own presets live in
``<data dir>/presets``. A name is looked up among the shipped presets first,
so ``cpu-demo`` always means the same thing; a path is used as given.
:func:`open_preset` is the one loader every ``--preset`` goes through.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import tuner
from tuner import paths
from tuner.export.errors import Issue, PresetError
from tuner.export.preset import Preset, load_preset


@dataclass(frozen=True)
class PresetEntry:
    """One preset file as listed by ``tunelab presets list``.

    Attributes:
        name: The preset's name (file stem if it does not load).
        path: The file.
        origin: ``"shipped"`` or ``"user"``.
        preset: The loaded preset (model placeholder unresolved), or None.
        error: Why it does not load, or empty.
    """

    name: str
    path: Path
    origin: str
    preset: Preset | None
    error: str = ""


def shipped_dir() -> Path | None:
    """The directory of shipped presets, or None when none can be found."""
    override = os.environ.get("TUNELAB_PRESETS_DIR")
    if override:
        return Path(override)
    candidates = [
        Path(tuner.__file__).resolve().parent.parent / "presets",
        Path(sys.prefix) / "share" / "tunelab" / "presets",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def user_dir() -> Path:
    """The directory of the user's own presets (may not exist yet)."""
    return paths.data_dir() / "presets"


def _files(directory: Path | None) -> list[Path]:
    if directory is None or not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.toml") if p.is_file())


def list_presets() -> list[PresetEntry]:
    """Every shipped and user preset, shipped first, each loaded without resolving the model."""
    entries: list[PresetEntry] = []
    for origin, directory in (("shipped", shipped_dir()), ("user", user_dir())):
        for path in _files(directory):
            try:
                preset = load_preset(path, resolve=False)
            except PresetError as exc:
                entries.append(PresetEntry(path.stem, path, origin, None, str(exc)))
                continue
            entries.append(PresetEntry(preset.name, path, origin, preset))
    return entries


@dataclass(frozen=True)
class ResolvedPreset:
    """Which file a ``--preset`` argument means.

    Attributes:
        path: The preset file.
        note: A sentence for the user when the choice was ambiguous (a
            shipped name that is also a file in the current directory), else empty.
    """

    path: Path
    note: str = ""


def _by_name(name: str) -> Path | None:
    for directory in (shipped_dir(), user_dir()):
        for path in _files(directory):
            if path.stem == name:
                return path
    for entry in list_presets():
        if entry.name == name:
            return entry.path
    return None


def resolve_preset(name_or_path: str) -> ResolvedPreset:
    """The file of a preset given by name (shipped, then user) or by path.

    A text with a ``/`` or ending in ``.toml`` is a path. A bare name is
    looked up among the shipped and user presets first, so ``cpu-demo``
    always means the same thing; when a file of that name is also in the
    current directory, the note says which was used and how to pick the file.

    Raises:
        PresetError: when nothing matches; the message lists the known names.
    """
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix == ".toml" or os.sep in name_or_path or name_or_path.startswith("."):
        if candidate.is_file():
            return ResolvedPreset(candidate)
        raise PresetError(str(candidate), [_missing(f"no preset file at {candidate}")])
    named = _by_name(name_or_path)
    if named is not None:
        note = ""
        if candidate.is_file():
            note = (
                f"using the preset named {name_or_path!r} ({named}), not the file "
                f"{name_or_path!r} in the current directory; write ./{name_or_path} for that file"
            )
        return ResolvedPreset(named, note)
    if candidate.is_file():
        return ResolvedPreset(candidate)
    names = sorted({e.name for e in list_presets()})
    known = ", ".join(names) if names else "none found"
    raise PresetError(
        name_or_path, [_missing(f"no preset named {name_or_path!r} (known: {known})")]
    )


def find_preset(name_or_path: str) -> Path:
    """The file of a preset given by name or path (see :func:`resolve_preset`)."""
    return resolve_preset(name_or_path).path


def open_preset(
    name_or_path: str,
    *,
    allow_env: tuple[str, ...] | frozenset[str] = (),
    allow_code: bool = False,
    resolve: bool = True,
) -> tuple[Preset, str]:
    """Resolves a ``--preset`` argument (name or path) and loads it: what every command calls.

    Returns:
        The preset and the resolution note (empty unless a name was ambiguous).

    Raises:
        PresetError: unknown name, unreadable file, any schema problem, or a
            code-loading engine argument without ``allow_code``.
    """
    found = resolve_preset(name_or_path)
    preset = load_preset(found.path, allow_env=allow_env, allow_code=allow_code, resolve=resolve)
    return preset, found.note


def _missing(message: str) -> Issue:
    return Issue("", message, "run `tunelab presets list`, or give a path to a .toml file")
