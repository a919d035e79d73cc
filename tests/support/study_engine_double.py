"""A knob-sensitive engine double for study tests: answers like vLLM, starts in 0.1 s.

This is a *double* of the vLLM engine for tests whose subject is not the
engine but the studies around it (the multi-worker search, kill-and-resume):
it starts in a fraction of a second where the real CPU engine needs about a
minute on 2 cores. Unlike ``engine_double.py`` (a fixed plan, for the slot
scheduler), its speed depends on the config's knob values, so a study over it
has a real optimum. It is started through the runner's ``engine_command``
like a real engine and serves ``/health``, ``/v1/models``, ``/tokenize``,
``/metrics`` and streaming ``/v1/completions`` in vLLM's SSE format.

- ``--max-num-seqs N`` (vLLM's flag, from the config's engine arguments): at
  most N streams generate at once; the others queue, as in vLLM's scheduler.
- ``DOUBLE_TOKEN_MS`` (environment, i.e. an env knob of the config): the gap
  between tokens of one stream, in ms (default 2); ``/metrics`` sums the gaps as vLLM's
  ``inter_token_latency_seconds`` histogram does (its ``_sum`` and ``_count``).
- ``DOUBLE_STARTUP_S``: seconds to sleep before listening (default 0.1).
- ``DOUBLE_NOISE``: launch-to-launch noise, the sigma of a log-normal factor
  drawn once per start and applied to the token gap (default 0: none), as a
  real engine's speed varies from one launch to the next.
- ``DOUBLE_START_LOG``: a file each start appends one JSON line to (pid, argv,
  knobs), so a test can count how many engines a study really started.
- ``--profiler-config {"torch_profiler_dir": DIR, ...}`` (vLLM's flag) arms
  ``/start_profile`` and ``/stop_profile`` (404 without it, as vLLM). The double
  has no torch to trace itself, so ``/stop_profile`` writes a *recorded real*
  vLLM CPU worker trace into DIR as ``rank0.<ns>.pt.trace.json.gz``:
  tests/data/traces/cpu-max-num-seqs-1 for ``--max-num-seqs 1``, the -32 one
  otherwise.

Run: ``python tests/support/study_engine_double.py --port P [--host H] [vLLM flags]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "engine-double"


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops SYNs under a burst of connections and
    # the client retries a second later: that would be the double's noise, not
    # the knob's effect.
    request_queue_size = 1024
    daemon_threads = True


TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"


class _FairSlots:
    """At most ``n`` streams at once, the waiting ones admitted first come first served, as
    vLLM's FCFS scheduler admits them (a semaphore lets a newcomer overtake a waiter: a few
    requests then wait several generations, and the p99 TTFT is no scheduler's)."""

    def __init__(self, n: int) -> None:
        self.free = n
        self.cond = threading.Condition()
        self.issued = 0
        self.admitted = 0

    def __enter__(self) -> None:
        with self.cond:
            ticket = self.issued
            self.issued += 1
            while ticket != self.admitted or self.free == 0:
                self.cond.wait()
            self.admitted += 1
            self.free -= 1
            self.cond.notify_all()

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.free += 1
            self.cond.notify_all()


class _State:
    def __init__(self, max_num_seqs: int, token_ms: float, profile_dir: str | None) -> None:
        self.slots = _FairSlots(max_num_seqs)
        self.max_num_seqs = max_num_seqs
        self.profile_dir = profile_dir
        self.token_ms = token_ms
        self.lock = threading.Lock()
        self.running = 0
        self.generated = 0
        self.itl_sum = 0.0  # vLLM's inter_token_latency_seconds histogram: sum and count
        self.itl_count = 0


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _send(self, code: int, raw: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _json(self, code: int, body: object) -> None:
            self._send(code, json.dumps(body).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json(200, {})
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": MODEL, "root": None}]})
            elif self.path == "/metrics":
                with state.lock:
                    text = (
                        f"vllm:num_requests_running {state.running}\n"
                        f"vllm:generation_tokens_total {state.generated}\n"
                        f"vllm:inter_token_latency_seconds_sum {state.itl_sum}\n"
                        f"vllm:inter_token_latency_seconds_count {state.itl_count}\n"
                    )
                self._send(200, text.encode(), "text/plain")
            else:
                self._json(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/tokenize":
                words = str(body.get("prompt", "")).split()
                self._json(200, {"tokens": list(range(1, len(words) + 1)), "count": len(words)})
            elif self.path == "/v1/completions":
                self._complete(body)
            elif self.path in ("/start_profile", "/stop_profile") and state.profile_dir:
                self._profile(self.path == "/start_profile")
            else:
                self._json(404, {"error": f"no route {self.path}"})

        def _profile(self, start: bool) -> None:
            if not start:
                name = "cpu-max-num-seqs-1" if state.max_num_seqs == 1 else "cpu-max-num-seqs-32"
                out = Path(state.profile_dir or ".") / f"rank0.{time.time_ns()}.pt.trace.json.gz"
                shutil.copyfile(TRACES / f"{name}.pt.trace.json.gz", out)
            self._send(200, b"", "application/json")

        def _event(self, data: object) -> None:
            self.wfile.write(f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode())

        def _complete(self, body: dict) -> None:
            n = int(body.get("max_tokens") or 16)
            prompt = body.get("prompt", "")
            prompt_len = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            with state.slots:
                with state.lock:
                    state.running += 1
                try:
                    last = None
                    for i in range(n):
                        time.sleep(state.token_ms / 1000.0)
                        now = time.monotonic()
                        if last is not None:
                            with state.lock:
                                state.itl_sum += now - last
                                state.itl_count += 1
                        last = now
                        self._event(
                            {
                                "id": "cmpl-double",
                                "object": "text_completion",
                                "model": MODEL,
                                "choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}],
                                "usage": None,
                            }
                        )
                        self.wfile.flush()
                    with state.lock:
                        state.generated += n
                finally:
                    with state.lock:
                        state.running -= 1
            usage = {
                "prompt_tokens": prompt_len,
                "completion_tokens": n,
                "total_tokens": prompt_len + n,
            }
            self._event({"id": "cmpl-double", "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--profiler-config", type=json.loads, default=None)
    args, unknown = parser.parse_known_args(argv)
    profile_dir = (args.profiler_config or {}).get("torch_profiler_dir")
    # Stop on SIGINT like vLLM (uvicorn installs its own handlers), even when started
    # from a shell that ignores SIGINT in background jobs: an inherited SIG_IGN would
    # make every stop wait out the runner's 10 s grace period.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    token_ms = float(os.environ.get("DOUBLE_TOKEN_MS", "2"))
    noise = float(os.environ.get("DOUBLE_NOISE", "0"))
    if noise > 0:
        token_ms *= math.exp(random.gauss(0.0, noise))
    startup = float(os.environ.get("DOUBLE_STARTUP_S", "0.1"))
    log = os.environ.get("DOUBLE_START_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            line = {
                "pid": os.getpid(),
                "max_num_seqs": args.max_num_seqs,
                "token_ms": token_ms,
                "argv": sys.argv[1:],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "t": time.time(),
            }
            fh.write(json.dumps(line) + "\n")
    print(
        f"study engine double: max-num-seqs={args.max_num_seqs} token_ms={token_ms} "
        f"ignored={unknown}",
        flush=True,
    )
    time.sleep(startup)
    state = _State(args.max_num_seqs, token_ms, profile_dir)
    server = _Server((args.host, args.port), _handler(state))
    print(f"INFO:     Uvicorn running on http://{args.host}:{args.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
