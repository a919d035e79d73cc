"""A deterministic vLLM-like ``/v1/completions`` server for the drift-guard tests.

A fake *server* at the HTTP boundary (named as one; the real engine is proven
in tests/test_guard_engine.py): a real HTTP/1.1 server on 127.0.0.1 in a
thread, answering non-streaming completions in vLLM 0.32's shape
(``token_ids``, ``prompt_token_ids``, ``logprobs.token_logprobs``,
``prompt_logprobs`` as lists of ``{"<id>": {"logprob": ...}}``).

Its "model": a prompt text is tokenised as BOS (1) then one token per byte
(byte + 2); the next token of a context is 300 + sha256(context) % 1000 with a
logprob derived from the same hash. Knobs make it drift on purpose:
``diverge`` (prompt prefix -> generated position from which greedy tokens
change), ``lp_shift`` (added to every logprob) and ``fault`` (a broken answer).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GEN_BASE = 300  # generated ids are >= this; prompt byte ids are < 258
OTHER_LOGPROB = -7.5  # logprob the model gives any token other than its argmax


def tokenize(text: str) -> list[int]:
    return [1, *(b + 2 for b in text.encode())]


@dataclass
class GuardStub:
    """The server's behaviour (mutable while it runs) and its request log."""

    diverge: dict[str, int] = field(default_factory=dict)
    lp_shift: float = 0.0
    fault: str | None = None  # http500 | notjson | no_token_ids | short_logprobs | huge | forced500
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None

    # -- the "model" ---------------------------------------------------------------
    def _prompt_text(self, ctx: list[int]) -> str:
        return bytes(t - 2 for t in ctx if 2 <= t < 258).decode(errors="replace")

    def next_token(self, ctx: list[int]) -> tuple[int, float]:
        h = int.from_bytes(hashlib.sha256(json.dumps(ctx).encode()).digest()[:8], "big")
        token, logprob = GEN_BASE + h % 1000, -0.01 - ((h >> 20) % 1000) / 500
        prompt_len = sum(1 for t in ctx if t < GEN_BASE)
        text = self._prompt_text(ctx)
        for prefix, pos in self.diverge.items():
            if text.startswith(prefix) and len(ctx) - prompt_len >= pos:
                token = GEN_BASE + (token - GEN_BASE + 1) % 1000
        return token, logprob + self.lp_shift

    def _greedy(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        ctx = tokenize(prompt)
        ids, lps = [], []
        for _ in range(max_tokens):
            tok, lp = self.next_token(ctx)
            ids.append(tok)
            lps.append(lp)
            ctx.append(tok)
        if self.fault == "short_logprobs":
            lps = lps[:-1]
        choice: dict[str, Any] = {
            "index": 0,
            "text": "",
            "logprobs": {"tokens": [f"t{i}" for i in ids], "token_logprobs": lps},
            "token_ids": ids,
            "prompt_token_ids": tokenize(prompt),
            "prompt_logprobs": None,
        }
        if self.fault == "no_token_ids":
            del choice["token_ids"]
        return {"object": "text_completion", "choices": [choice]}

    def _forced(self, ids: list[int]) -> dict[str, Any]:
        entries: list[Any] = [None]
        for i in range(1, len(ids)):
            tok, lp = self.next_token(ids[:i])
            entries.append({str(ids[i]): {"logprob": lp if tok == ids[i] else OTHER_LOGPROB}})
        choice = {"index": 0, "text": "", "prompt_logprobs": entries, "token_ids": None}
        return {"object": "text_completion", "choices": [choice]}

    def answer(self, payload: dict[str, Any]) -> tuple[int, bytes]:
        """(status, body) for one request, faults included."""
        self.requests.append(payload)
        if self.fault == "http500":
            return 500, b'{"error": "boom"}'
        if self.fault == "notjson":
            return 200, b"<html>proxy error</html>"
        if self.fault == "huge":
            return 200, b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        prompt = payload.get("prompt")
        if isinstance(prompt, list):
            if self.fault == "forced500":
                return 500, b'{"error": "no prompt logprobs"}'
            return 200, json.dumps(self._forced(prompt)).encode()
        return 200, json.dumps(self._greedy(str(prompt), int(payload["max_tokens"]))).encode()

    # -- serving -------------------------------------------------------------------
    def __enter__(self) -> GuardStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, out = stub.answer(json.loads(body))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
