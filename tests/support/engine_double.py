"""An engine double: stands in for `vllm serve` where the logic under test is tunelab's own.

Run as ``python -m tests.support.engine_double --port N [--plan JSON]
[--startup S] [--record FILE]``. It logs the GPU-visibility variables it was
started with (the line a real engine's log would not have), optionally
sleeps ``--startup`` seconds to mimic start-up, appends a JSON line with its
pid, CUDA_VISIBLE_DEVICES and start time to ``--record``, then serves the
programmable OpenAI-compatible stub (``/health``, ``/v1/completions``,
``/metrics``) on the port. It is named a double because it is one: the
slot scheduler's concurrency is tested with it, the real CPU engine is used
everywhere a vLLM behaviour matters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from tests.support.openai_stub import Plan, serve

VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--plan", default="{}")
    ap.add_argument("--startup", type=float, default=0.0)
    ap.add_argument("--record", default=None)
    args = ap.parse_args()
    seen = {k: os.environ.get(k) for k in VISIBILITY}
    print(
        f"[engine double] pid={os.getpid()} " + " ".join(f"{k}={v}" for k, v in seen.items()),
        flush=True,
    )
    if args.startup:
        time.sleep(args.startup)
    if args.record:
        with open(args.record, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "t": time.time(), **seen}) + "\n")
    asyncio.run(serve(Plan.from_json(args.plan), args.port))


if __name__ == "__main__":
    main()
