"""The vLLM ``--config`` YAML equivalent of a config.

vLLM reads a YAML file given with ``vllm serve --config FILE`` and turns each
``key: value`` into ``--key value`` (``true`` into ``--key``, ``false`` into
``--no-key``, a mapping into a JSON string; vllm/utils/argparse_utils.py
``load_config_file``). The keys here are the flags without dashes, as vLLM
takes them. Values are chosen so that vLLM rebuilds the same argv as
``EngineConfig.serve_args()``: lists are written as JSON strings (a YAML list
would become several arguments) and ``cudagraph-mode`` is folded into the
``compilation-config`` mapping, as the engine does. YAML has no place for the
environment, so the variables are listed in a comment as ``export`` lines.

vLLM turns a YAML ``key: value`` into two argv words, ``--key`` and ``value``
(``load_config_file``), so a string value starting with ``-`` would be read
as an option there (``served-model-name: --trust-remote-code``); such a
config is refused for this format (the launch script carries it safely as
``--key='value'``).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from tuner.config import COMPILATION_FIELDS, EngineConfig
from tuner.export.env_policy import split_secrets
from tuner.export.quoting import QuotingError, ansi_c_quote


def config_mapping(config: EngineConfig) -> dict[str, Any]:
    """The ``--config`` mapping: ``model`` first, then the engine arguments in argv order."""
    mapping: dict[str, Any] = {"model": config.model}
    compilation: dict[str, Any] | None = None
    prefix = "--compilation-config="
    for item in config.engine_args():
        if item.startswith(prefix):
            # The engine's own merged form (cudagraph-mode folded in).
            compilation = json.loads(item[len(prefix) :])
    for key in sorted(config.engine):
        if key == "compilation-config" or key in COMPILATION_FIELDS:
            continue
        value = config.engine[key]
        if isinstance(value, str) and value.startswith("-"):
            raise QuotingError(
                f"{key} = {value[:40]!r} starts with '-': vLLM's --config YAML passes it as a "
                "separate word, which would be read as an option; export the launch script "
                "(--format sh) instead of YAML"
            )
        if isinstance(value, list):
            mapping[key] = json.dumps(value, sort_keys=True, separators=(",", ":"))
        elif isinstance(value, dict):
            mapping[key] = value
        else:
            mapping[key] = value
    if compilation is not None:
        mapping["compilation-config"] = compilation
    return mapping


def render_yaml(config: EngineConfig, header: list[str]) -> str:
    """The YAML text: header comments, env as comment lines, then the mapping."""
    env, _secrets = split_secrets(config.env_vars())
    lines = list(header)
    lines.append("# Use: vllm serve --config THIS_FILE --host 0.0.0.0 --port 8000")
    if env:
        lines.append("# Export this environment first (exactly as benchmarked):")
        lines += [f"#   export {name}={ansi_c_quote(value)}" for name, value in env.items()]
    body = yaml.safe_dump(
        config_mapping(config),
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1000,
    )
    return "\n".join(lines) + "\n" + body
