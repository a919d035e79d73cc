"""Which config relations a vLLM release refuses at start, in its own words (for vllm_tables.py).

tunelab names a few relations between engine arguments that a config can break (batched tokens
below max-num-seqs, below max-model-len with chunked prefill off); whether the release refuses
each one, and the sentence it refuses it with, are read by building vLLM's own config class
with values that break it (``SchedulerConfig``'s validators run as they do at engine start).
The sentence is kept as a template: each probe value is replaced by its argument's name.
"""

from __future__ import annotations

import re
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
