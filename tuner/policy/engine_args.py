"""Which engine arguments a config may carry: plain data only, at every level of a JSON value.

vLLM has arguments whose value names code to import or run (``--worker-cls``,
``--tool-parser-plugin``), and JSON-valued configs whose fields do the same:
``--compilation-config`` reaches torch inductor's own config (``inductor_compile_config``:
``cpp.march``, ``cpp.cxx`` ... reach the C++ compiler, which ran a shell command while the
engine compiled), a pass list to import (``inductor_passes``) and a cache of compiled code to
load (``cache_dir``). A denylist of such names cannot keep up with vLLM, so this is an
allowlist, derived from the release's own declarations (``tuner.vllm_tables``):

- an argument or nested field is data when vLLM declares it a bool, a number or one of fixed
  choices (or lists and unions of those), or when it is a nested config whose fields all are;
- a string, a path, a dict or anything else is data only when :data:`DATA_TEXT` says what the
  text is (a model id, a registry name, a list of layer names ...), with the reason;
- everything else — and every argument vLLM does not have — is refused unless the user passes
  ``--allow-code``; the known code loaders (:data:`CODE_LOADING_ARGS`) say what they load.

Secrets are refused whatever the consent: ``--hf-token``/``--api-key`` and secret-named keys
inside JSON values (an API key in ``kv_connector_extra_config``) would be stored and exported.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import tuner.knobs as knobs
from tuner.bounded import InputTooLargeError, loads
from tuner.policy.consent import ALLOW_CODE_OPTION, Consent
from tuner.policy.violation import Violation
from tuner.redact import SECRET_ENGINE_ARGS
from tuner.vllm_tables import VllmTable, is_data, table

# Argument (flag without dashes) -> what it makes vLLM load or run, with the vLLM 0.32.0 source
# that does it (followed from EngineArgs/FrontendArgs to importlib.import_module,
# resolve_obj_by_qualname, import_from_path).
CODE_LOADING_ARGS: Mapping[str, str] = {
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
    "io-processor-plugin": "loads an installed plugin chosen by the config (vllm/plugins/io_processors)",
    "worker-cls": (
        "imports the named class as the GPU worker "
        "(vllm/v1/worker/worker_base.py resolve_obj_by_qualname)"
    ),
    "worker-extension-cls": (
        "imports the named class into every worker "
        "(vllm/v1/worker/worker_base.py resolve_obj_by_qualname)"
    ),
    "scheduler-cls": (
        "imports the named class as the scheduler (vllm/config/scheduler.py resolve_obj_by_qualname)"
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
        "registers 'module:class' targets as model classes (vllm/config/model.py)"
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

# distributed-executor-backend: these are vLLM's own; any other string is imported as a class
# (vllm/v1/executor/abstract.py Executor.get_class).
BUILTIN_EXECUTORS = frozenset({"mp", "ray", "uni", "external_launcher"})

# Text (and dict) settings that are plain data, keyed by option name or "ConfigClass.field",
# with what the text is. Anything typed as text and not here is refused without --allow-code.
DATA_TEXT: Mapping[str, str] = {
    "served-model-name": "names under which the API serves the model",
    "tokenizer": "a hub id or path like the model (its code runs only with trust-remote-code)",
    "hf-config-path": "a hub id or path like the model",
    "spec-model": "a hub id or path like the model",
    "revision": "a git revision",
    "code-revision": "a git revision",
    "tokenizer-revision": "a git revision",
    "download-dir": "where weights are downloaded, like the model path",
    "quantization": "a method name from vLLM's registry",
    "attention-backend": "a backend name from vLLM's registry",
    "mm-encoder-attn-backend": "a backend name from vLLM's registry",
    "mamba-backend": "a backend name from vLLM's registry",
    "load-format": "a loader name from vLLM's registry",
    "tokenizer-mode": "a tokenizer mode from vLLM's registry",
    "model-impl": "an implementation name (auto, vllm, transformers ...)",
    "config-format": "a config format name (auto, hf, mistral)",
    "reasoning-parser": "a parser name from vLLM's registry (the plugin option is code)",
    "tool-call-parser": "a parser name from vLLM's registry (the plugin option is code)",
    "data-parallel-backend": "mp or ray",
    "optimization-level": "an optimisation level (O0 ... O3)",
    "generation-config": "'auto', 'vllm' or a folder holding generation_config.json",
    "chat-template": "a Jinja template, rendered in vLLM's sandboxed environment",
    "response-role": "a role name",
    "cohere-format": "a format name",
    "fingerprint-value": "a text the API reports",
    "show-hidden-metrics-for-version": "a version number",
    "data-parallel-address": "a network address",
    "master-addr": "a network address",
    "disable-access-log-for-endpoints": "URL paths",
    "root-path": "a URL path prefix",
    "allowed-headers": "CORS header names",
    "allowed-methods": "CORS method names",
    "allowed-origins": "CORS origins",
    "ignore-patterns": "file name patterns",
    "cpu-offload-params": "parameter names",
    "offload-params": "parameter names",
    "kv-cache-dtype-skip-layers": "layer names",
    "sleep-preserve-parameter-names": "parameter names",
    "lora-target-modules": "module names",
    "lora-modules": "LoRA adapters (weights) as name=path",
    "numa-bind-cpus": "CPU lists",
    "device-ids": "device ids",
    "pt-load-map-location": "a device mapping",
    "override-generation-config": "default sampling parameters",
    "limit-mm-per-prompt": "counts per modality",
    "mm-processor-kwargs": "keyword values for the model's processor",
    "media-io-kwargs": "keyword values for the media loaders",
    "default-chat-template-kwargs": "template variables",
    "custom-histogram-buckets": "bucket bounds",
    "default-mm-loras": "LoRA adapters (weights) by modality",
    "hf-overrides": "fields of the model's config (code only through auto_map, refused below)",
    "CompilationConfig.custom_ops": "names of vLLM's custom ops to switch on or off",
    "CompilationConfig.splitting_ops": "names of ops to split the graph at",
    "CompilationConfig.compile_sizes": "batch sizes (or 'cudagraph_capture_sizes')",
    "AttentionConfig.backend_per_kind": "backend names from vLLM's registry",
    "KernelConfig.linear_backend_per_quant": "backend names from vLLM's registry",
    "IrOpPriorityConfig.rms_norm": "provider names",
    "IrOpPriorityConfig.fused_add_rms_norm": "provider names",
    "IrOpPriorityConfig.gelu_and_mul_sparse": "provider names",
    "SpeculativeConfig.model": "a hub id or path like the model",
    "SpeculativeConfig.revision": "a git revision",
    "SpeculativeConfig.code_revision": "a git revision",
    "SpeculativeConfig.quantization": "a method name from vLLM's registry",
    "KVTransferConfig.kv_connector": "a connector name from vLLM's registry",
    "KVTransferConfig.engine_id": "an id",
    "KVTransferConfig.kv_buffer_device": "a device name",
    "ECTransferConfig.ec_connector": "a connector name from vLLM's registry",
    "ECTransferConfig.engine_id": "an id",
    "ECTransferConfig.ec_buffer_device": "a device name",
    "ECTransferConfig.ec_ip": "a network address",
    "ReasoningConfig.reasoning_parser": "a parser name from vLLM's registry",
    "ReasoningConfig.reasoning_start_str": "a marker text",
    "ReasoningConfig.reasoning_end_str": "a marker text",
    "StructuredOutputsConfig.reasoning_parser": "a parser name from vLLM's registry",
}

# Text fields that are data only with these values (vLLM imports any other as a dotted name).
DATA_CHOICES: Mapping[str, frozenset[str]] = {
    "CompilationConfig.backend": frozenset({"", "inductor", "eager"}),
}


def _dotted_name(value: Any) -> bool:
    """vLLM's test for a custom proposer's import path (vllm/config/speculative.py
    ``SpeculativeConfig._is_custom_proposer_path``): ``pkg.Class``, no '/', no URL."""
    if not isinstance(value, str) or "/" in value or value.startswith(("http:", "https:", "file:")):
        return False
    parts = value.split(".")
    return len(parts) >= 2 and all(part.isidentifier() for part in parts)


_CUSTOM_PROPOSER = (
    "imports a custom proposer class (vllm/v1/spec_decode/custom_class_proposer.py "
    "importlib.import_module)"
)
# Values that are code although their type is data (a choice or a model id).
CODE_VALUES: Mapping[str, tuple[Callable[[Any], bool], str]] = {
    "spec-method": (lambda v: v == "custom_class", _CUSTOM_PROPOSER),
    "SpeculativeConfig.method": (lambda v: v == "custom_class", _CUSTOM_PROPOSER),
    "spec-model": (_dotted_name, _CUSTOM_PROPOSER),
    "SpeculativeConfig.model": (_dotted_name, _CUSTOM_PROPOSER),
}

# Keys that name code wherever they appear inside a JSON value (hf-overrides' auto_map is read
# only with trust-remote-code, but a config that carries it is a config that wants code).
_CODE_KEYS = frozenset({"auto_map", "trust_remote_code"})
_SECRET_KEY_RE = re.compile(
    r"(^|[_-])(token|api[_-]?key|apikey|secret|password|passwd|credentials?|private[_-]?key)"
    r"([_-]|$)",
    re.IGNORECASE,
)


def is_secret_arg(key: str) -> bool:
    """True when the engine argument ``key`` (no dashes) carries a credential."""
    return key.strip().lstrip("-").replace("_", "-").lower() in SECRET_ENGINE_ARGS


def is_secret_key(key: str) -> bool:
    """True when a key inside a JSON value names a credential (``api_key``, ``password`` ...)."""
    return bool(_SECRET_KEY_RE.search(key))


def check(
    key: str, value: Any, consent: Consent, vllm_version: str | None = None
) -> list[Violation]:
    """The policy's refusals for the engine argument ``key = value`` (empty: allowed).

    Args:
        key: The flag without dashes.
        value: Its typed value (a JSON object may come as its text).
        consent: What the user allowed (``--allow-code`` lifts all but secrets).
        vllm_version: The release whose declarations decide (default: the shipped table).
    """
    if is_secret_arg(key):
        env = SECRET_ENGINE_ARGS[key.replace("_", "-").lower()]
        return [
            Violation(
                "engine",
                key,
                f"{key} carries a secret, and tunelab never stores or writes secrets",
                f"remove it and export {env} in the shell that starts vLLM (vLLM reads it there)",
                "secret",
            )
        ]
    value = _json_value(value)
    found = list(_secrets(key, value))
    if not consent.code:
        found += _code(key, value, table(vllm_version))
    return found


def _code(key: str, value: Any, tbl: VllmTable) -> list[Violation]:
    """What makes ``key = value`` code, or not known to be data."""
    if key in CODE_LOADING_ARGS:
        if (
            value is False
            or value is None
            or (key != "trust-remote-code" and value in ("", [], {}))
        ):
            return []  # off / empty: nothing is loaded
        return [_violation(key, f"{key} loads code: it {CODE_LOADING_ARGS[key]}")]
    if key == "distributed-executor-backend":
        if value is None or value in BUILTIN_EXECUTORS:
            return []
        return [
            _violation(
                key,
                f"{key}={str(value)[:60]!r} loads code: vLLM imports a name that is not one of "
                f"{', '.join(sorted(BUILTIN_EXECUTORS))} as the executor class "
                "(vllm/v1/executor/abstract.py)",
            )
        ]
    kind = _kind_of(key, tbl)
    if kind is None:
        return [
            _violation(
                key,
                f"{key} is not an argument of vLLM {tbl.version}'s `vllm serve`, so tunelab "
                "cannot tell what it would load",
            )
        ]
    return list(_walk(key, key, value, kind, tbl))


def _kind_of(key: str, tbl: VllmTable) -> dict[str, Any] | None:
    """What ``key``'s value is: the catalogue's type where tunelab has the knob, else vLLM's."""
    knob = knobs.get(key)
    declared = tbl.option_value(key)
    if declared is None and key in tbl.flag_names:
        return {"kind": "bool"}  # a switch's negation: --no-x, or 0.33's --disable-x
    if knob is not None and knob.key == key:
        catalogue = str(knob.type)
        if catalogue in ("bool", "int", "float", "choice"):
            return {"kind": catalogue, "choices": list(knob.choices or ())}
        if declared is not None:
            return declared
        return {"kind": "config", "config": ""} if catalogue == "json" else {"kind": catalogue}
    return declared


def _walk(
    top: str, path: str, value: Any, kind: Mapping[str, Any], tbl: VllmTable, where: str = ""
) -> Iterator[Violation]:
    """The refusals inside ``value`` of type ``kind`` at ``path`` (``where``: "Config.field")."""
    name = kind.get("kind")
    named = where or path
    if named in CODE_VALUES and CODE_VALUES[named][0](value):
        yield _violation(
            top, f"{path}={str(value)[:60]!r} loads code: it {CODE_VALUES[named][1]}", path
        )
        return
    if name in ("bool", "int", "float", "choice"):
        return
    if named in DATA_CHOICES:
        if not isinstance(value, str) or value not in DATA_CHOICES[named]:
            choices = ", ".join(repr(c) for c in sorted(DATA_CHOICES[named]))
            yield _violation(
                top,
                f"{path}={str(value)[:60]!r} names code: vLLM imports any value but {choices}",
                path,
            )
        return
    if name == "list" and isinstance(value, list | tuple):
        for item in value:
            yield from _walk(top, path, item, kind["items"], tbl, where)
        return
    if name == "union" and is_data(kind):
        return
    if name == "config" and isinstance(value, Mapping):
        yield from _walk_config(top, path, value, str(kind.get("config", "")), tbl)
        return
    if named in DATA_TEXT:
        yield from _code_keys(top, path, value)
        return
    yield _violation(
        top,
        f"{path} is not a setting tunelab knows to be plain data (vLLM {tbl.version} reads it "
        f"as {_describe(kind)}, which can name files or code to load)",
        path,
    )


def _walk_config(
    top: str, path: str, value: Mapping[str, Any], config: str, tbl: VllmTable
) -> Iterator[Violation]:
    fields = tbl.config_fields(config)
    for sub, item in value.items():
        where = f"{path}.{sub}"
        as_option = str(sub).replace("_", "-")
        if as_option in CODE_LOADING_ARGS or as_option == "distributed-executor-backend":
            # A nested config of the same kind (a draft model's ModelConfig ...) loads
            # code exactly as the top-level argument does.
            for found in _code(as_option, item, tbl):
                yield _violation(top, found.message.replace(as_option, where, 1), where)
            continue
        field_kind = fields.get(str(sub))
        if field_kind is None:
            # vLLM's config classes forbid unknown keys (config/utils.py, extra="forbid"): the
            # engine would refuse it too, so say that first, with the nearest declared field.
            near = difflib.get_close_matches(str(sub), list(fields), n=1, cutoff=0.6)
            yield _violation(
                top,
                f"{where} is not a field vLLM {tbl.version} declares"
                + (f" in {config}" if config else "")
                + " (vLLM refuses unknown keys at start"
                + (f"; did you mean {near[0]}?" if near else "")
                + "), and tunelab cannot tell what it would load",
                where,
            )
            continue
        if item is None:
            continue
        yield from _walk(top, where, item, field_kind, tbl, f"{config}.{sub}" if config else "")


def _code_keys(top: str, path: str, value: Any) -> Iterator[Violation]:
    """Keys that name code anywhere inside a data-typed JSON value (``auto_map``)."""
    if isinstance(value, Mapping):
        for sub, item in value.items():
            if str(sub) in _CODE_KEYS:
                yield _violation(
                    top, f"{path}.{sub} asks the model loader to run code from the repository"
                )
            else:
                yield from _code_keys(top, f"{path}.{sub}", item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _code_keys(top, path, item)


def _secrets(key: str, value: Any, path: str = "") -> Iterator[Violation]:
    """Secret-named keys anywhere inside a JSON value."""
    where = path or key
    if isinstance(value, Mapping):
        for sub, item in value.items():
            inner = f"{where}.{sub}"
            if is_secret_key(str(sub)) and item not in (None, "", [], {}):
                yield Violation(
                    "engine",
                    inner,
                    f"{inner} looks like a secret, and tunelab never stores or writes secrets",
                    "remove it; give the credential to the connector through its own "
                    "environment variable or file in the shell that starts vLLM",
                    "secret",
                )
            else:
                yield from _secrets(key, item, inner)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _secrets(key, item, where)


def _violation(top: str, message: str, path: str = "") -> Violation:
    return Violation(
        "engine",
        path or top,
        message,
        f"remove {top}; if you trust where this config comes from and want what it loads, "
        f"pass {ALLOW_CODE_OPTION}",
        "code",
    )


def _json_value(value: Any) -> Any:
    """A JSON object or array given as text, as the object (so its keys are checked)."""
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        try:
            return loads(value, what="engine argument")
        except (json.JSONDecodeError, InputTooLargeError):
            return value
    return value


def _describe(kind: Mapping[str, Any]) -> str:
    name = str(kind.get("kind"))
    if name == "list":
        return f"a list of {_describe(kind['items'])}"
    if name == "union":
        return " or ".join(_describe(a) for a in kind["alts"])
    if name == "config":
        return f"a {kind.get('config') or 'config'} table"
    return {"str": "text", "path": "a path", "dict": "a table", "any": "anything"}.get(name, name)
