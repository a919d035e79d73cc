"""The validation probe: runs in the engine's interpreter and builds vLLM's config for a config.

``tuner.vllm_validate`` runs this file's source with ``python -c`` in a subprocess (the tunelab
process never imports vLLM). It reads one JSON request on stdin — the model, the ``vllm serve``
arguments (``--key=value`` words) and the environment — parses the arguments with vLLM's own
``EngineArgs`` parser and calls ``create_engine_config()``: every validator vLLM runs at engine
start up to loading weights (scheduler, cache, compilation, speculative, parallel and model
configs). No engine, no weights, no GPU. The answer is one JSON line after ``MARKER``: ``ok``,
and for a refusal vLLM's own sentences (pydantic's messages, the field named; or the
exception's text). Only the standard library and vLLM (through ``importlib``) are used.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

MARKER = "@@TUNELAB_VALIDATE@@"


def _parser() -> Any:
    arg_utils = importlib.import_module("vllm.engine.arg_utils")
    for name in ("vllm.utils.argparse_utils", "vllm.utils"):
        try:
            flexible = importlib.import_module(name).FlexibleArgumentParser
            break
        except (ImportError, AttributeError):
            continue
    return arg_utils.EngineArgs, arg_utils.EngineArgs.add_cli_args(flexible())


def sentences(exc: BaseException) -> list[str]:
    """What vLLM said: each pydantic error as "field: message", else the exception's text."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            found = []
            for item in errors():
                where = ".".join(str(p) for p in item.get("loc", ()) if p is not None)
                msg = str(item.get("msg", "")).removeprefix("Value error, ")
                found.append(f"{where}: {msg}" if where else msg)
            if found:
                return found
        except Exception:  # fall back to the text
            pass
    text = str(exc).strip() or type(exc).__name__
    return [text.splitlines()[0][:800]]


def main() -> int:
    request = json.loads(sys.stdin.read())
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    answer: dict[str, Any]
    try:
        engine_args, parser = _parser()
        namespace = parser.parse_args(["--model", request["model"], *request["args"]])
        engine_args.from_cli_args(namespace).create_engine_config()
        answer = {"ok": True, "refusals": []}
    except SystemExit as exc:  # argparse: an argument vLLM does not take
        answer = {"ok": False, "kind": "arguments", "refusals": [f"argument error ({exc.code})"]}
    except Exception as exc:  # vLLM's refusal, reported in its own words
        answer = {"ok": False, "kind": type(exc).__name__, "refusals": sentences(exc)}
        # Not reaching the model's files (offline, a missing path, a bad hub id) is no verdict
        # on the config: the hub's errors are OSErrors, a malformed id an HFValidationError.
        answer["unreachable"] = (
            isinstance(exc, OSError) or type(exc).__name__ == "HFValidationError"
        )
    version = getattr(importlib.import_module("vllm"), "__version__", None)
    answer["vllm_version"] = str(version).split("+")[0] if version else None
    sys.stdout.write("\n" + MARKER + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
