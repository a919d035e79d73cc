"""Which config relations a vLLM release refuses at start, in its own words (for vllm_tables.py).

tunelab names a few relations between engine arguments that a config can break (batched tokens
below max-num-seqs, below max-model-len with chunked prefill off); whether the release refuses
each one, and the sentence it refuses it with, are read by building vLLM's own config class
with values that break it (``SchedulerConfig``'s validators run as they do at engine start).
The sentence is kept as a template: each probe value is replaced by its argument's name.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import typing
from typing import Any

# relation -> the SchedulerConfig arguments that break it (values chosen to be distinct).
SCHEDULER_PROBES: dict[str, dict[str, Any]] = {
    "mbt_below_max_num_seqs": {
        "max_num_batched_tokens": 16,
        "max_num_seqs": 64,
        "max_model_len": 2048,
    },
    "mbt_below_max_model_len_without_chunked_prefill": {
        "max_num_batched_tokens": 1024,
        "max_num_seqs": 8,
        "max_model_len": 2048,
        "enable_chunked_prefill": False,
    },
}


def _template(message: str, probe: dict[str, Any]) -> str:
    for name, value in probe.items():
        if isinstance(value, int) and not isinstance(value, bool):
            message = re.sub(rf"\b{value}\b", "{" + name + "}", message)
    return message


def scheduler_refusals() -> dict[str, Any]:
    """For each relation: {"refused": bool, "message": template} from vLLM's SchedulerConfig."""
    from vllm.config import SchedulerConfig

    out: dict[str, Any] = {}
    for relation, probe in SCHEDULER_PROBES.items():
        try:
            SchedulerConfig(**probe, is_encoder_decoder=False)
        except Exception as exc:  # pydantic's ValidationError, or a ValueError
            errors = getattr(exc, "errors", None)
            text = errors()[0]["msg"] if callable(errors) else str(exc)
            message = _template(str(text).removeprefix("Value error, "), probe)
            out[relation] = {"refused": True, "message": message}
        else:
            out[relation] = {"refused": False}
    return out


def quantization() -> dict[str, Any]:
    """``--quantization`` per platform, as ``ModelConfig._verify_quantization`` decides it.

    Every method of ``QuantizationMethods``, the ones ``DEPRECATED_QUANTIZATION_METHODS`` lets
    through only with ``--allow-deprecated-quantization``, and for ROCm and CPU the platform's
    ``supported_quantization`` (empty: every method) with the sentence ``verify_quantization``
    refuses an unsupported one with ("{quantization}" stands for the method).
    """
    import vllm.model_executor.layers.quantization as me_quant
    import vllm_attention  # the amdsmi stand-in, for platforms/rocm.py on a machine without it
    from vllm.platforms.cpu import CpuPlatform

    vllm_attention._amdsmi_stand_in()
    from vllm.platforms.rocm import RocmPlatform

    platforms: dict[str, Any] = {}
    for name, cls in (("rocm", RocmPlatform), ("cpu", CpuPlatform)):
        supported = list(cls.supported_quantization)
        refused = [m for m in me_quant.QUANTIZATION_METHODS if supported and m not in supported]
        message = None
        if refused:
            try:
                cls.verify_quantization(refused[0])
            except ValueError as exc:
                message = str(exc).replace(refused[0], "{quantization}")
        platforms[name] = {"supported": supported, "message": message}
    from vllm.config import model as model_config

    deprecated_message = None
    source = textwrap.dedent(inspect.getsource(model_config.ModelConfig._verify_quantization))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            first = node.exc.args[0]
            if isinstance(first, ast.Constant) and "deprecated" in str(first.value):
                deprecated_message = str(first.value).replace("%s", "{quantization}")
    from vllm.model_executor.layers.quantization import modelopt

    return {
        # ModelOpt's quant_algo (config.json or hf_quant_config.json) -> the method vLLM runs
        "modelopt_algos": _modelopt_algos(modelopt),
        "methods": list(me_quant.QUANTIZATION_METHODS),
        "deprecated": list(me_quant.DEPRECATED_QUANTIZATION_METHODS),
        "deprecated_message": deprecated_message,
        "platforms": platforms,
    }


def async_scheduling() -> dict[str, Any]:
    """Which speculative methods an explicit ``--async-scheduling`` accepts, and the refusal.

    Read from ``VllmConfig``'s check that says so, in either of its shapes: up to 0.32 an
    ``if`` comparing ``speculative_config.method`` with ``get_args(<Literal types>)`` and plain
    strings raises directly; from 0.33 that ``if`` names the incompatibility inside ``if not
    self.use_v2_model_runner:`` and a later ``raise`` quotes it, so the refusal holds only on
    the V1 model runner (``v1_runner_only``), which vLLM uses when ``VLLM_USE_V2_MODEL_RUNNER``
    is off or a feature the V2 runner lacks is on (``v2_unsupported_methods``: speculative
    methods it names). The methods and sentences are resolved in vLLM's own module.
    """
    import vllm.config.vllm as vllm_config_module

    tree = ast.parse(inspect.getsource(vllm_config_module))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not _compares_spec_method(node.test):
            continue
        raised = _async_raise(node, tree)
        if raised is None:
            continue
        methods = _spec_methods(node.test, vllm_config_module)
        found: dict[str, Any] = {"spec_methods": sorted(set(methods)), "message": raised}
        if _under_v1_runner(node, parents):
            found["v1_runner_only"] = True
            found["runner_env"] = "VLLM_USE_V2_MODEL_RUNNER"
            found["v2_unsupported_methods"] = _v2_unsupported_methods(tree)
        return found
    return {}


def _compares_spec_method(test: ast.expr) -> bool:
    text = ast.unparse(test)
    return ".method" in text and "get_args(" in text


def _spec_methods(test: ast.expr, module: Any) -> list[str]:
    """The methods an ``if``'s test lets through: constants, tuples and ``get_args(Literal)``."""
    methods: list[str] = []
    for sub in ast.walk(test):
        if isinstance(sub, ast.Compare):
            for comp in sub.comparators:
                if isinstance(comp, ast.Constant) and isinstance(comp.value, str):
                    methods.append(comp.value)  # not the `is not None` beside them
                elif isinstance(comp, ast.Tuple):
                    methods += [str(e.value) for e in comp.elts if isinstance(e, ast.Constant)]
        if isinstance(sub, ast.Call) and ast.unparse(sub.func) == "get_args":
            name = ast.unparse(sub.args[0])
            methods += [str(v) for v in typing.get_args(getattr(module, name))]
    return methods


def _message_text(node: ast.expr) -> str:
    """A message expression as text, an f-string's fields kept as ``{expr}``."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
            else:
                parts.append(_message_text(value))  # type: ignore[arg-type]
        return "".join(parts)
    return ast.unparse(node)


def _async_raise(check: ast.If, tree: ast.Module) -> str | None:
    """The refusal ``check`` leads to, with ``{method}`` for the speculative method."""
    for stmt in check.body:
        if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call) and stmt.exc.args:
            text = _message_text(stmt.exc.args[0])
            if "async scheduling" in text.lower():
                return text.replace("{self.speculative_config.method}", "{method}")
    assigned = {
        t.id: _message_text(stmt.value)
        for stmt in check.body
        if isinstance(stmt, ast.Assign)
        for t in stmt.targets
        if isinstance(t, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            text = _message_text(node.exc.args[0])
            if "async scheduling" not in text.lower():
                continue
            for name, value in assigned.items():
                if "{" + name + "}" in text:
                    return text.replace("{" + name + "}", value).replace(
                        "{spec_config.method}", "{method}"
                    )
    return None


def _under_v1_runner(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "use_v2_model_runner" in ast.unparse(node.test):
            return True
    return False


def _v2_unsupported_methods(tree: ast.Module) -> list[str]:
    """Speculative methods the V2 model runner lists as unsupported (so V1 runs them)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_get_v2_model_runner_un"):
            found: list[str] = []
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Compare)
                    and ast.unparse(sub.left).endswith(".method")
                    and isinstance(sub.ops[0], ast.In)
                    and isinstance(sub.comparators[0], ast.Tuple)
                ):
                    elts = sub.comparators[0].elts
                    found += [str(e.value) for e in elts if isinstance(e, ast.Constant)]
            return sorted(set(found))
    return []


def _modelopt_algos(modelopt: Any) -> dict[str, str]:
    """ModelOpt's ``quant_algo`` -> the method vLLM runs: ``LINEAR_ALGOS`` from 0.30; before it,
    each ModelOpt config class's ``override_quantization_method`` asked for every algorithm
    in ``QUANT_ALGOS`` (the classes claim their algorithms themselves)."""
    if hasattr(modelopt, "LINEAR_ALGOS"):
        return {algo: row[0] for algo, row in modelopt.LINEAR_ALGOS.items()}
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

    classes = [
        obj
        for obj in vars(modelopt).values()
        if isinstance(obj, type)
        and issubclass(obj, QuantizationConfig)
        and obj.__module__ == modelopt.__name__
    ]
    found: dict[str, str] = {}
    for algo in getattr(modelopt, "QUANT_ALGOS", ()):
        for cls in classes:
            try:
                method = cls.override_quantization_method(
                    {"quant_method": "modelopt", "quant_algo": algo}, None
                )
            except Exception:
                continue
            if method:
                found[algo] = str(method)
                break
    return found
