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
        "modelopt_algos": {algo: row[0] for algo, row in modelopt.LINEAR_ALGOS.items()},
        "methods": list(me_quant.QUANTIZATION_METHODS),
        "deprecated": list(me_quant.DEPRECATED_QUANTIZATION_METHODS),
        "deprecated_message": deprecated_message,
        "platforms": platforms,
    }


def async_scheduling() -> dict[str, Any]:
    """Which speculative methods an explicit ``--async-scheduling`` accepts, and the refusal.

    Read from the ``raise`` in ``VllmConfig`` that says so: the ``if`` around it compares
    ``speculative_config.method`` with ``get_args(<Literal types>)`` and with plain strings;
    both are resolved in vLLM's own module (nothing is typed by hand).
    """
    import vllm.config.vllm as vllm_config_module

    tree = ast.parse(inspect.getsource(vllm_config_module))
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        raises = [
            r
            for r in node.body
            if isinstance(r, ast.Raise)
            and "async scheduling is only supported" in ast.unparse(r).replace('" "', "")
        ]
        if not raises:
            continue
        methods: list[str] = []
        for sub in ast.walk(node.test):
            if isinstance(sub, ast.Compare) and isinstance(sub.comparators[0], ast.Constant):
                methods.append(str(sub.comparators[0].value))
            if isinstance(sub, ast.Call) and ast.unparse(sub.func) == "get_args":
                name = ast.unparse(sub.args[0])
                methods += [str(v) for v in typing.get_args(getattr(vllm_config_module, name))]
        call = raises[0].exc
        message = ""
        if isinstance(call, ast.Call) and call.args:
            message = str(ast.literal_eval(call.args[0]))
        return {"spec_methods": sorted(set(methods)), "message": message}
    return {}
