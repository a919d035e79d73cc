"""The one corpus of settings a config must not carry without consent, for every entry point.

Each :class:`Setting` is one class of issue 26's list: an environment variable or an engine
argument (or a field inside a JSON-valued one) that reaches a loader, a compiler, a shell, an
import path or a plugin, or that is a secret. ``tests/test_policy_entry_points.py`` drives
every setting through every face that turns a config into an engine (run, ab, sweep, tune,
capacity, ablate, presets verify, jobs run-spec, the TUI) — so a new entry point is added to
that list, and meets all of these at once.

The judge's evidence that an engine saw a setting is :class:`StartSpy`: it stands in for the
one place a process is launched (``Engine._start_once``, after the policy's last gate in
``Engine.start``) and records the config of every launch attempt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import tomli_w

CANARY = "hf_CANARY_policy_7e51"
SHELL = "native -wrapper '/bin/sh,-c,touch PWNED'"


@dataclass(frozen=True)
class Setting:
    """One hostile setting.

    Attributes:
        name: Case id.
        key: Environment variable (upper case) or engine argument.
        value: Its value (text for a variable; typed for an engine argument).
        mentions: Text the refusal must contain (the key, or the nested field).
        flags: The consent that lifts it (empty: a secret, never lifted).
    """

    name: str
    key: str
    value: Any
    mentions: str
    flags: tuple[str, ...] = ()

    @property
    def is_env(self) -> bool:
        return self.key.isupper()

    @property
    def scalar(self) -> bool:
        """True when the value can be a ``--param KEY=V1,V2`` item (no JSON, no comma)."""
        return not isinstance(self.value, dict | list) and "," not in str(self.value)

    def item(self) -> str:
        """``KEY=VALUE`` as typed after ``--set``."""
        return f"{self.key}={self.text()}"

    def text(self) -> str:
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, dict | list):
            return json.dumps(self.value)
        return str(self.value)

    def values(self) -> str:
        """Two values of the setting for ``--param``/``--sweep`` (both hostile)."""
        if isinstance(self.value, bool):
            return self.text()
        return f"{self.text()},{self.text()}2"

    def apply(self, env: dict[str, str], engine: dict[str, Any]) -> None:
        """Puts the setting into a config's tables."""
        if self.is_env:
            env[self.key] = self.text()
        else:
            engine[self.key] = self.value

    def seen_in(self, config: Any) -> bool:
        """True when ``config`` (an EngineConfig) carries this setting."""
        if self.is_env:
            return self.key in config.env
        return self.key in config.engine


def corpus() -> list[Setting]:
    """Every class of issue 26's policy list (compiler flags, loaders, shells, plugins, secrets)."""
    env = ("--allow-env",)
    return [
        Setting("ld-preload", "LD_PRELOAD", "/tmp/evil.so", "LD_PRELOAD", (*env, "LD_PRELOAD")),
        Setting("pythonpath", "PYTHONPATH", "/tmp/evil", "PYTHONPATH", (*env, "PYTHONPATH")),
        Setting("bash-env", "BASH_ENV", "/tmp/evil.sh", "BASH_ENV", (*env, "BASH_ENV")),
        Setting(
            "inductor-march-env",
            "TORCHINDUCTOR_CPP_MARCH",
            SHELL,
            "TORCHINDUCTOR_CPP_MARCH",
            (*env, "TORCHINDUCTOR_CPP_MARCH"),
        ),
        Setting("cxxflags", "CXXFLAGS", "-fplugin=/tmp/evil.so", "CXXFLAGS", (*env, "CXXFLAGS")),
        Setting(
            "triton-env",
            "TRITON_LIBCUDA_PATH",
            "/tmp/evil",
            "TRITON_LIBCUDA_PATH",
            (*env, "TRITON_LIBCUDA_PATH"),
        ),
        Setting("vllm-plugins", "VLLM_PLUGINS", "evil", "VLLM_PLUGINS", (*env, "VLLM_PLUGINS")),
        Setting(
            "nccl-plugin",
            "NCCL_NET_PLUGIN",
            "/tmp/evil.so",
            "NCCL_NET_PLUGIN",
            (*env, "NCCL_NET_PLUGIN"),
        ),
        Setting("secret-env", "HF_TOKEN", CANARY, "HF_TOKEN"),
        Setting(
            "inductor-compile-config",
            "compilation-config",
            {"inductor_compile_config": {"cpp.march": SHELL}},
            "inductor_compile_config",
            ("--allow-code",),
        ),
        Setting(
            "inductor-passes",
            "compilation-config",
            {"inductor_passes": {"post_grad": "evilpkg.Pass"}},
            "inductor_passes",
            ("--allow-code",),
        ),
        Setting(
            "compile-cache-dir",
            "compilation-config",
            {"cache_dir": "/tmp/evil-cache"},
            "cache_dir",
            ("--allow-code",),
        ),
        Setting(
            "trust-remote-code", "trust-remote-code", True, "trust-remote-code", ("--allow-code",)
        ),
        Setting(
            "tool-parser-plugin",
            "tool-parser-plugin",
            "/tmp/pwn.py",
            "tool-parser-plugin",
            ("--allow-code",),
        ),
        Setting(
            "kv-connector-module",
            "kv-transfer-config",
            {"kv_connector": "X", "kv_role": "kv_both", "kv_connector_module_path": "evilpkg"},
            "kv_connector_module_path",
            ("--allow-code",),
        ),
        Setting(
            "nested-secret",
            "kv-transfer-config",
            {
                "kv_connector": "X",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"api_key": CANARY},
            },
            "api_key",
        ),
        Setting("unknown-flag", "some-future-flag", "1", "some-future-flag", ("--allow-code",)),
        Setting(
            "nested-remote-code",
            "speculative-config",
            {"model": "org/draft", "draft_model_config": {"trust_remote_code": True}},
            "trust_remote_code",
            ("--allow-code",),
        ),
        Setting(
            "insecure-serialization",
            "VLLM_ALLOW_INSECURE_SERIALIZATION",
            "1",
            "VLLM_ALLOW_INSECURE_SERIALIZATION",
            (*env, "VLLM_ALLOW_INSECURE_SERIALIZATION"),
        ),
    ]


def preset_text(
    setting: Setting | None,
    *,
    model: str = "engine-double",
    workload: dict[str, Any] | None = None,
    results: dict[str, Any] | None = None,
) -> str:
    """A preset carrying ``setting`` (and a [workload]/[results] for ``presets verify``)."""
    env: dict[str, str] = {}
    engine: dict[str, Any] = {"max-num-seqs": 4}
    if setting is not None:
        setting.apply(env, engine)
    doc: dict[str, Any] = {
        "preset": {"name": "hostile", "schema_version": 1},
        "target": {"model": model},
        "env": env,
        "engine": engine,
    }
    if workload is not None:
        doc["workload"] = workload
    if results is not None:
        doc["results"] = results
    return tomli_w.dumps(doc)


@dataclass
class StartSpy:
    """Records the config of every engine launch attempt, and launches nothing."""

    configs: list[Any] = field(default_factory=list)

    def install(self, monkeypatch: Any) -> StartSpy:
        from tuner.engine import server

        spy = self

        async def _start_once(engine: Any, port: int, attempt: int) -> None:
            spy.configs.append(engine.spec.config)
            raise server.EngineStartError("policy test: no engine is launched", [])

        monkeypatch.setattr(server.Engine, "_start_once", _start_once)
        return self

    def saw(self, setting: Setting) -> bool:
        return any(setting.seen_in(c) for c in self.configs)
