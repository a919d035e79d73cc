"""Running the probes on a live OpenAI-compatible vLLM server.

Per probe two non-streaming ``/v1/completions`` calls through the project's
bounded control client (tuner.bench.control: size and whole-exchange time
limits):

1. greedy: ``temperature=0``, ``logprobs=1``, ``ignore_eos`` (every run makes
   exactly ``max_tokens`` tokens, so lengths compare) and ``return_token_ids``
   (vLLM 0.32: ``choices[0].token_ids`` and ``prompt_token_ids``;
   vllm/entrypoints/openai/completion/protocol.py CompletionRequest and
   serving.py CompletionResponseChoice);
2. teacher-forced: prompt = the probe's token ids + the reference's
   continuation (the baseline's, else this run's own), ``max_tokens=1``,
   ``prompt_logprobs=0``; ``choices[0].prompt_logprobs[i]`` maps token id
   (a JSON string key) to ``{"logprob": ...}`` for prompt position i
   (vllm/logprobs.py Logprob; -inf is clamped to -9999.0 by
   vllm/entrypoints/generate/base/serving.py clamp_prompt_logprobs).
   Such a request never reads the prefix cache (vllm/sampling_params.py
   ``skip_reading_prefix_cache`` defaults to ``prompt_logprobs is not None``),
   so every position is computed and scored, whatever the trial's caching knob.

A bad answer never raises: the GuardRun carries the reason instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tuner.bench.control import ControlClient, ControlError
from tuner.guard.model import GuardRun, ProbeResult
from tuner.guard.probes import BUILTIN_PROBES, DEFAULT_GUARD_TOKENS

REQUEST_TIMEOUT_S = 60.0
MAX_ANSWER_BYTES = 1024 * 1024  # 16 tokens of logprobs are a few KiB


class _BadAnswer(Exception):
    """The server's answer lacks what the guard needs (message: one line)."""


def _choice(answer: Any) -> dict[str, Any]:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _BadAnswer("answer has no choices")
    return choices[0]


def _int_list(raw: Any, what: str) -> list[int]:
    if not isinstance(raw, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in raw
    ):
        raise _BadAnswer(f"answer has no {what} (is this a vLLM server?)")
    return list(raw)


def _number(raw: Any) -> float | None:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    return None


def _parse_greedy(prompt: str, answer: Any, max_tokens: int) -> ProbeResult:
    choice = _choice(answer)
    token_ids = _int_list(choice.get("token_ids"), "token_ids")
    prompt_ids = _int_list(choice.get("prompt_token_ids"), "prompt_token_ids")
    if len(token_ids) > max_tokens:
        raise _BadAnswer(f"answer has {len(token_ids)} tokens, {max_tokens} were asked")
    lp = choice.get("logprobs")
    raw = lp.get("token_logprobs") if isinstance(lp, dict) else None
    if not isinstance(raw, list) or len(raw) != len(token_ids):
        raise _BadAnswer("answer's logprobs do not match its tokens")
    return ProbeResult(prompt, prompt_ids, token_ids, [_number(v) for v in raw])


def _parse_forced(answer: Any, prompt_len: int, forced: list[int]) -> list[float | None]:
    raw = _choice(answer).get("prompt_logprobs")
    if not isinstance(raw, list) or len(raw) != prompt_len + len(forced):
        raise _BadAnswer("answer has no prompt_logprobs for every prompt token")
    out: list[float | None] = []
    for token, entry in zip(forced, raw[prompt_len:], strict=True):
        item = entry.get(str(token)) if isinstance(entry, dict) else None
        out.append(_number(item.get("logprob")) if isinstance(item, dict) else None)
    return out


async def _probe(
    client: ControlClient,
    model: str,
    prompt: str,
    max_tokens: int,
    reference: list[int] | None,
) -> ProbeResult:
    greedy = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "logprobs": 1,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    ans = await client.request(
        "POST",
        "/v1/completions",
        payload=greedy,
        timeout_s=REQUEST_TIMEOUT_S,
        max_bytes=MAX_ANSWER_BYTES,
    )
    if ans.status != 200:
        raise _BadAnswer(f"answered HTTP {ans.status}: {ans.body[:120]!r}")
    result = _parse_greedy(prompt, ans.json(), max_tokens)
    forced = result.token_ids if reference is None else reference
    if not forced:
        return result
    payload = {
        "model": model,
        "prompt": [*result.prompt_ids, *forced],
        "max_tokens": 1,
        "temperature": 0,
        "prompt_logprobs": 0,
    }
    ans = await client.request(
        "POST",
        "/v1/completions",
        payload=payload,
        timeout_s=REQUEST_TIMEOUT_S,
        max_bytes=MAX_ANSWER_BYTES,
    )
    if ans.status != 200:
        raise _BadAnswer(f"teacher-forced pass answered HTTP {ans.status}: {ans.body[:120]!r}")
    result.forced_ids = list(forced)
    result.forced_logprobs = _parse_forced(ans.json(), len(result.prompt_ids), forced)
    return result


async def run_probes(
    base_url: str,
    model: str,
    probes: Sequence[str] = BUILTIN_PROBES,
    max_tokens: int = DEFAULT_GUARD_TOKENS,
    reference: GuardRun | None = None,
    *,
    reference_id: str | None = None,
) -> GuardRun:
    """Runs every probe greedily, then scores the reference's tokens teacher-forced.

    Args:
        base_url: The server, ``http://host:port``.
        model: The served model name.
        probes: Prompt texts (default: the built-in set).
        max_tokens: Greedy tokens per probe.
        reference: The baseline's guard run: its continuations are the ones
            scored teacher-forced (for a prompt it lacks, this run's own are).
        reference_id: The baseline trial's id, recorded with the run.

    Returns:
        The GuardRun; on any failure its ``error`` says why and ``probes``
        holds what completed before.
    """
    t0 = time.monotonic()
    run = GuardRun(model=model, max_tokens=max_tokens, reference=reference_id)
    ref = {p.prompt: p.token_ids for p in reference.probes} if reference and reference.ok else {}
    client = ControlClient(base_url)
    try:
        for prompt in probes:
            run.probes.append(await _probe(client, model, prompt, max_tokens, ref.get(prompt)))
    except (ControlError, _BadAnswer) as exc:
        run.error = f"probe {len(run.probes) + 1}/{len(probes)}: {exc}"
    finally:
        await client.aclose()
        run.seconds = time.monotonic() - t0
    return run
