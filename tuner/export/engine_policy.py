"""Which engine arguments a shared preset may carry: none that loads or runs code.

A preset is a file people share and run, so importing one is a trust
boundary, exactly as for its ``[env]`` (:mod:`tuner.export.env_policy`).
vLLM has arguments whose value names code to import or run; a preset that
sets one would run that code on the machine that starts it. They are refused
in an imported preset unless the user passes ``--allow-code``, and every
refusal names the argument and what it loads.

The list is derived from vLLM 0.32.0's own argument definitions
(``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` and
``vllm/entrypoints/launchers/cli_args.py`` ``FrontendArgs``) by following
each value to where vLLM imports it (``importlib.import_module``,
``resolve_obj_by_qualname``, ``import_from_path``). Reviewed and *not* listed:
``hf-overrides`` (a JSON mapping of config fields; it cannot name code
without ``trust-remote-code``), ``chat-template`` (rendered by vLLM in a
sandboxed Jinja environment), ``tokenizer``/``hf-config-path`` (remote code
in them runs only with ``trust-remote-code``), ``tokenizer-mode``,
``load-format`` and ``attention-backend`` (names from vLLM's own registries),
``pooler-config`` (activation functions are restricted to
``torch.nn.modules`` by vLLM, model_executor/layers/pooler/activations.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ALLOW_CODE_OPTION = "--allow-code"

# Argument (flag without dashes) -> what it makes vLLM load or run, with the
# vLLM 0.32.0 source that does it.
CODE_LOADING_ARGS: dict[str, str] = {
    "trust-remote-code": (
        "runs Python code shipped with the model repository (transformers auto_map; "
        "vllm/config/model.py trust_remote_code)"
    ),
    "tool-parser-plugin": (
        "imports the named Python file at start-up "
        "(vllm/tool_parsers/abstract_tool_parser.py import_tool_parser)"
    ),
    "reasoning-parser-plugin": (
        "imports the named Python file at start-up "
        "(vllm/reasoning/abs_reasoning_parsers.py import_reasoning_parser)"
    ),
    "io-processor-plugin": (
        "loads an installed plugin chosen by the preset (vllm/plugins/io_processors)"
    ),
    "worker-cls": (
        "imports the named class as the GPU worker "
        "(vllm/v1/worker/worker_base.py resolve_obj_by_qualname)"
    ),
    "worker-extension-cls": (
        "imports the named class into every worker "
        "(vllm/v1/worker/worker_base.py resolve_obj_by_qualname)"
    ),
    "scheduler-cls": (
        "imports the named class as the scheduler "
        "(vllm/config/scheduler.py resolve_obj_by_qualname)"
    ),
    "middleware": (
        "imports the named objects into the API server "
        "(vllm/entrypoints/launchers/cli_args.py FrontendArgs.middleware)"
    ),
    "logits-processors": (
        "imports the named classes into the sampler "
        "(vllm/v1/sample/logits_processor/__init__.py importlib.import_module)"
    ),
    "model-class-overrides": (
        "registers 'module:class' targets as model classes "
        "(vllm/config/model.py model_class_overrides)"
    ),
    "config": (
        "reads a vLLM YAML file that can set any argument, trust-remote-code included "
        "(vllm/utils/argparse_utils.py _pull_args_from_config)"
    ),
    "logging-config": (
        "configures Python logging, whose '()' factories instantiate any class "
        "(logging.config.dictConfig)"
    ),
    "log-config-file": (
        "reads a Python logging config file, whose '()' factories instantiate any class "
        "(logging.config.dictConfig)"
    ),
}

# distributed-executor-backend: these are vLLM's own; any other string is
# imported as a class (vllm/v1/executor/abstract.py Executor.get_class).
_BUILTIN_EXECUTORS = frozenset({"mp", "ray", "uni", "external_launcher"})

# Keys inside JSON-valued arguments (kv-transfer-config, ec-transfer-config,
# ec-manager-config, compilation-config, speculative-config ...) that name
# code: kv_connector_module_path (vllm/config/kv_transfer.py),
# ec_connector_module_path (vllm/config/ec_transfer.py), spec_module_path
# (vllm/v1/kv_offload/factory.py), encoder_cache_manager_cls
# (vllm/config/ec_manager_config.py), inductor_passes
# (vllm/config/compilation.py), *_plugin.
_NESTED_CODE_KEY_RE = re.compile(
    r"(module_path|module-path|_cls$|-cls$|^cls$|cls_path|class_name|qualname|plugin|"
    r"inductor_passes|inductor-passes)",
    re.IGNORECASE,
)
_QUALNAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


@dataclass(frozen=True)
class CodeArg:
    """One engine argument (or a part of one) that loads or runs code.

    Attributes:
        key: The engine argument (``tool-parser-plugin``), or a dotted path
            into a JSON-valued one (``kv-transfer-config.kv_connector_module_path``).
        reason: What it loads, with the vLLM source that does it.
    """

    key: str
    reason: str

    def message(self) -> str:
        """The refusal, naming the argument and what it loads."""
        return f"{self.key} loads code: it {self.reason}"

    def fix(self) -> str:
        """How to proceed: remove it, or accept it knowingly."""
        return (
            f"remove {self.key.split('.')[0]} from the preset; if you trust where the preset "
            f"comes from and want that code to run, pass {ALLOW_CODE_OPTION}"
        )


def code_loading(key: str, value: Any) -> list[CodeArg]:
    """The code-loading parts of one engine argument ``key = value`` (empty when none).

    Args:
        key: The flag without dashes, as in a preset's ``[engine]``.
        value: Its typed value.
    """
    if key in CODE_LOADING_ARGS:
        if value is False or (key != "trust-remote-code" and value in ("", [], {})):
            return []  # off / empty: nothing is loaded
        return [CodeArg(key, CODE_LOADING_ARGS[key])]
    if key == "distributed-executor-backend":
        if isinstance(value, str) and value not in _BUILTIN_EXECUTORS:
            return [
                CodeArg(
                    key,
                    f"imports {value!r} as the executor class when it is not one of "
                    f"{', '.join(sorted(_BUILTIN_EXECUTORS))} (vllm/v1/executor/abstract.py)",
                )
            ]
        return []
    found = list(_nested(key, value))
    if key == "compilation-config" and isinstance(value, Mapping):
        backend = value.get("backend")
        if isinstance(backend, str) and _QUALNAME_RE.match(backend):
            found.append(
                CodeArg(
                    f"{key}.backend",
                    "imports a dotted backend name as the compiler backend "
                    "(vllm/config/compilation.py resolve_obj_by_qualname)",
                )
            )
    if key == "speculative-config" and isinstance(value, Mapping):
        model = value.get("model")
        custom = value.get("method") == "custom_class" or (
            isinstance(model, str) and "/" not in model and _QUALNAME_RE.match(model) is not None
        )
        if custom:
            found.append(
                CodeArg(
                    f"{key}.model",
                    "imports a dotted class name as a custom proposer "
                    "(vllm/v1/spec_decode/custom_class_proposer.py)",
                )
            )
    return found


def _nested(path: str, value: Any) -> Iterator[CodeArg]:
    if isinstance(value, Mapping):
        for sub, item in value.items():
            where = f"{path}.{sub}"
            if _NESTED_CODE_KEY_RE.search(str(sub)) and item not in (None, "", [], {}):
                yield CodeArg(where, "names a Python module or class that vLLM imports")
            else:
                yield from _nested(where, item)
    elif isinstance(value, list):
        for item in value:
            yield from _nested(path, item)


def code_loading_args(engine: Mapping[str, Any]) -> list[CodeArg]:
    """Every code-loading argument in an ``[engine]`` table, in key order."""
    found: list[CodeArg] = []
    for key in sorted(engine):
        found += code_loading(key, engine[key])
    return found
