"""A programmable OpenAI-compatible streaming server, the ground truth for bench tests.

This is a fake *server* at the HTTP boundary (named as one): a real HTTP/1.1
server on 127.0.0.1, written on raw asyncio streams so it can outpace the
clients it measures, that streams ``/v1/completions`` and
``/v1/chat/completions`` in vLLM's exact SSE format (compact JSON, one event
per token, ``"usage":null`` in each chunk, a final usage chunk, ``[DONE]``).
A *plan* (JSON) sets the truth: time to first token and inter-token gaps
(absolute deadlines from the request's arrival, so sleep jitter never
accumulates), and faults by request sequence number: HTTP errors, mid-stream
error events, stalls and abrupt disconnects. ``/metrics`` exports vLLM-named
gauges and counters driven by the plan. It logs, per request, the payload and
the CLOCK_MONOTONIC time each chunk was written (``GET /_stub/log``), which
``time.perf_counter`` in another process reads on the same clock.

Run it as ``python -m tests.support.openai_stub --plan JSON [--cpu N]``; it
prints ``PORT <n>`` when listening. ``StubProcess`` does that for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL = "stub-model"


@dataclass
class Plan:
    """The programmed truth. Times in ms; faults keyed by request sequence (0-based).

    Attributes:
        ttft_ms: Delay from request arrival to the first token chunk.
        itl_ms: Gap between token chunks (a list cycles per token).
        faults: {"seq": [..] or "every": k (+ "offset"), "kind": "http" |
            "stall" | "disconnect" | "error_event" | "slow", "status", "message",
            "after_tokens", "stall_s", "ttft_ms" (for slow)}.
        kv_per_request: KV-cache usage each active stream adds (capped at 1).
        waiting_over: Active streams beyond this count show as waiting.
        preempt_every: One preemption counted per this many requests (0: none).
        prefix_hit_rate: Share of prefix-cache queries reported as hits.
        log_prompts: Log each request's whole prompt (chat: its messages), for
            the multi-turn tests; off by default (prompts can be large).
        burst: With zero delays, token chunks written per loop turn (each
            still its own SSE event and HTTP chunk); >1 makes the stub
            cheaper per token so that it can outrun the client it measures.
    """

    ttft_ms: float = 100.0
    itl_ms: float | list[float] = 50.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    kv_per_request: float = 0.05
    waiting_over: int = 1_000_000
    preempt_every: int = 0
    prefix_hit_rate: float = 0.0
    burst: int = 1
    log_prompts: bool = False

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls(**json.loads(text)) if text else cls()

    def fault_for(self, seq: int) -> dict[str, Any] | None:
        for f in self.faults:
            if seq in f.get("seq", ()):
                return f
            every = f.get("every")
            if every and seq % every == f.get("offset", 0):
                return f
        return None

    def gap_s(self, k: int) -> float:
        gaps = self.itl_ms if isinstance(self.itl_ms, list) else [self.itl_ms]
        return gaps[k % len(gaps)] / 1000.0


class StubServer:
    """The server state: plan, counters, per-request log."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.seq = 0
        self.gen = 0
        self.active = 0
        self.preemptions = 0
        self.prefix_queries = 0
        self.log: list[dict[str, Any]] = []

    # ---- HTTP plumbing -------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                t_recv = time.perf_counter()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                body = await reader.readexactly(n) if n else b""
                keep = await self.route(method, path, body, writer, t_recv)
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    def _send(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str) -> None:
        reason = {200: "OK", 404: "Not Found"}.get(status, "Error")
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )

    async def route(
        self, method: str, path: str, body: bytes, w: asyncio.StreamWriter, t: float
    ) -> bool:
        if method == "GET" and path == "/v1/models":
            data = {"object": "list", "data": [{"id": MODEL, "object": "model", "root": None}]}
            self._send(w, 200, json.dumps(data).encode(), "application/json")
        elif method == "GET" and path == "/health":
            self._send(w, 200, b"", "text/plain")
        elif method == "GET" and path == "/metrics":
            self._send(w, 200, self.metrics_text().encode(), "text/plain; version=0.0.4")
        elif method == "POST" and path == "/tokenize":
            req = json.loads(body)
            toks = [10 + (b % 200) for b in req.get("prompt", "").encode()]
            out = {"tokens": toks, "count": len(toks), "max_model_len": 4096}
            self._send(w, 200, json.dumps(out).encode(), "application/json")
        elif method == "GET" and path == "/_stub/log":
            self._send(w, 200, json.dumps(self.log).encode(), "application/json")
        elif method == "POST" and path == "/_stub/reset":
            self.plan = Plan.from_json(body.decode())
            self.seq, self.preemptions, self.prefix_queries, self.log = 0, 0, 0, []
            self.gen += 1  # streams left over from the old plan (stalls) stop counting
            self.active = 0
            self._send(w, 200, b"{}", "application/json")
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return await self.stream(path, json.loads(body), w, t)
        else:
            self._send(w, 404, b'{"error":{"message":"no such route"}}', "application/json")
        await w.drain()
        return True

    def metrics_text(self) -> str:
        p = self.plan
        lab = f'{{engine="0",model_name="{MODEL}"}}'
        kv = min(1.0, self.active * p.kv_per_request)
        waiting = max(0, self.active - p.waiting_over)
        hits = int(self.prefix_queries * p.prefix_hit_rate)
        return (
            "# HELP vllm:num_requests_running Number of requests running.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{lab} {float(self.active - waiting)}\n"
            f"vllm:num_requests_waiting{lab} {float(waiting)}\n"
            f"vllm:kv_cache_usage_perc{lab} {kv}\n"
            "# TYPE vllm:num_preemptions counter\n"
            f"vllm:num_preemptions_total{lab} {float(self.preemptions)}\n"
            f"vllm:prefix_cache_queries_total{lab} {float(self.prefix_queries)}\n"
            f"vllm:prefix_cache_hits_total{lab} {float(hits)}\n"
        )

    # ---- the stream ------------------------------------------------------
    async def stream(
        self, path: str, req: dict[str, Any], w: asyncio.StreamWriter, t_recv: float
    ) -> bool:
        seq = self.seq
        self.seq += 1
        chat = path.endswith("chat/completions")
        n_out = int(req.get("max_completion_tokens" if chat else "max_tokens") or 16)
        messages = req.get("messages") or []
        prompt = " ".join(m["content"] for m in messages) if chat else req.get("prompt")
        prompt_len = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        entry: dict[str, Any] = {
            "seq": seq,
            "gen": self.gen,
            "t_recv": t_recv,
            "model": req.get("model"),
            "max_tokens": n_out,
            "min_tokens": req.get("min_tokens"),
            "ignore_eos": req.get("ignore_eos"),
            "include_usage": (req.get("stream_options") or {}).get("include_usage"),
            "prompt_len": prompt_len,
            "prompt_head": prompt[:8] if isinstance(prompt, list) else str(prompt)[:40],
            "chunk_times": [],
        }
        if self.plan.log_prompts:
            entry["prompt"] = [[m["role"], m["content"]] for m in messages] if chat else prompt
        self.log.append(entry)
        p = self.plan
        fault = p.fault_for(seq)
        if fault and fault["kind"] == "http":
            await asyncio.sleep(p.ttft_ms / 1000.0)
            msg = json.dumps(
                {
                    "error": {
                        "message": fault.get("message", "injected"),
                        "code": fault.get("status", 500),
                    }
                }
            )
            self._send(w, int(fault.get("status", 500)), msg.encode(), "application/json")
            await w.drain()
            return True
        self.prefix_queries += prompt_len
        if p.preempt_every and seq % p.preempt_every == 0:
            self.preemptions += 1
        self.active += 1
        try:
            return await self._emit(chat, n_out, prompt_len, seq, fault, entry, w, t_recv)
        finally:
            self._finish(entry)

    def _finish(self, entry: dict[str, Any]) -> None:
        """Count a stream as no longer active (once), before its last bytes go out."""
        if not entry.get("finished") and entry["gen"] == self.gen:
            entry["finished"] = True
            self.active -= 1

    async def _emit(
        self,
        chat: bool,
        n_out: int,
        prompt_len: int,
        seq: int,
        fault: dict[str, Any] | None,
        entry: dict[str, Any],
        w: asyncio.StreamWriter,
        t_recv: float,
    ) -> bool:
        p = self.plan
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        rid = f"cmpl-{seq}"
        if chat:
            tok = (
                f'data: {{"id":"chat{rid}","object":"chat.completion.chunk","created":1,"model":"{MODEL}",'
                '"choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
            )
        else:
            tok = (
                f'data: {{"id":"{rid}","object":"text_completion","created":1,"model":"{MODEL}",'
                '"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,'
                '"stop_reason":null,"prompt_token_ids":null,"token_ids":null}],"usage":null}\n\n'
            )
        tb = tok.encode()
        tok_chunk = b"%x\r\n%s\r\n" % (len(tb), tb)
        times = entry["chunk_times"]
        zero = p.ttft_ms == 0 and p.itl_ms == 0
        ttft_ms = fault["ttft_ms"] if fault and fault["kind"] == "slow" else p.ttft_ms
        deadline = t_recv + ttft_ms / 1000.0
        stop_at = (
            fault.get("after_tokens", 1)
            if fault and fault["kind"] not in ("http", "slow")
            else None
        )
        if zero and p.burst > 1 and stop_at is None:
            left = n_out
            while left > 0:
                k = min(p.burst, left)
                w.write(tok_chunk * k)
                left -= k
                await w.drain()
                await asyncio.sleep(0)
            n_out_sent = 0
        else:
            n_out_sent = n_out
        for k in range(n_out_sent):
            if stop_at is not None and k == stop_at:
                return await self._fault(fault, w, rid)
            if zero:
                await asyncio.sleep(0)
            else:
                delay = deadline - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                deadline += p.gap_s(k)
            if not zero:
                times.append(time.perf_counter())  # taken before the write: a lower bound
            w.write(tok_chunk)
            await w.drain()
        usage = json.dumps(
            {
                "id": rid,
                "object": "text_completion",
                "created": 1,
                "model": MODEL,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt_len,
                    "total_tokens": prompt_len + n_out,
                    "completion_tokens": n_out,
                },
            },
            separators=(",", ":"),
        )
        self._finish(entry)  # the client may send its next request as soon as it sees [DONE]
        tail = f"data: {usage}\n\n".encode()
        done = b"data: [DONE]\n\n"
        w.write(b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail, len(done), done))
        await w.drain()
        return True

    async def _fault(self, fault: dict[str, Any], w: asyncio.StreamWriter, rid: str) -> bool:
        kind = fault["kind"]
        if kind == "stall":
            await w.drain()
            await asyncio.sleep(float(fault.get("stall_s", 30.0)))
            return False
        if kind == "disconnect":
            await w.drain()
            w.transport.abort()
            return False
        if kind == "error_event":
            ev = json.dumps({"error": {"message": fault.get("message", "injected"), "code": 500}})
            data = f"data: {ev}\n\ndata: [DONE]\n\n".encode()
            w.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
            await w.drain()
            return True
        raise ValueError(f"unknown fault kind {kind!r}")


async def serve(plan: Plan, port: int) -> None:
    stub = StubServer(plan)
    server = await asyncio.start_server(stub.handle, "127.0.0.1", port, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


class StubProcess:
    """Runs the stub in its own process (optionally pinned to one CPU).

    Args:
        plan: Initial plan (dict as in Plan).
        cpu: CPU to pin the stub to, or None.
        uvloop: Serve on uvloop (faster; for the client-ceiling benchmark).
    """

    def __init__(
        self, plan: dict[str, Any] | None = None, cpu: int | None = None, uvloop: bool = False
    ) -> None:
        self._plan = plan or {}
        self._cpu = cpu
        self._uvloop = uvloop
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> StubProcess:
        root = Path(__file__).resolve().parents[2]
        cmd = [sys.executable, "-m", "tests.support.openai_stub", "--plan", json.dumps(self._plan)]
        if self._cpu is not None:
            cmd += ["--cpu", str(self._cpu)]
        if self._uvloop:
            cmd.append("--uvloop")
        self._proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("PORT "):
            self._proc.kill()
            raise RuntimeError(f"stub failed to start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def reset(self, plan: dict[str, Any]) -> None:
        """Install a new plan and clear the log and counters."""
        req = urllib.request.Request(
            self.url + "/_stub/reset", data=json.dumps(plan).encode(), method="POST"
        )
        urllib.request.urlopen(req, timeout=5).read()

    def log(self) -> list[dict[str, Any]]:
        """Per-request log: payload facts and chunk write times."""
        return json.loads(urllib.request.urlopen(self.url + "/_stub/log", timeout=5).read())


def main() -> None:
    ap = argparse.ArgumentParser(description="Programmable OpenAI-compatible streaming stub")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--plan", default="{}")
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--uvloop", action="store_true")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    plan = Plan.from_json(args.plan)
    if args.uvloop:
        import uvloop

        uvloop.run(serve(plan, args.port))
    else:
        asyncio.run(serve(plan, args.port))


if __name__ == "__main__":
    main()
