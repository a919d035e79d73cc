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

A bad answer never raises: the GuardRun carries the reason instead. The
answer is foreign input (issue 26): it is parsed depth-limited
(:func:`tuner.bounded.loads`: a reply nested 10^5 levels deep raised
``RecursionError`` and left a finished trial ``interrupted``), and every
logprob must be a finite number a log-probability can be
(:func:`tuner.guard.model.logprob_problem`): a NaN, an infinity, a string or a
positive number is a guard failure with the reason, never a value that could
compare as "close".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tuner import bounded
from tuner.bench.control import ControlAnswer, ControlClient, ControlError
from tuner.guard.model import GuardRun, ProbeResult, logprob_problem
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


def _json(ans: ControlAnswer) -> Any:
    """The answer's body as JSON, depth-limited; _BadAnswer when it is not usable JSON."""
    if not ans.body.strip():
        raise _BadAnswer("answered with an empty body")
    try:
        return bounded.loads(ans.body, what="server's answer")
    except bounded.InputTooLargeError:
        raise _BadAnswer(
            f"answered with JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep"
        ) from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise _BadAnswer(f"answered with non-JSON text: {ans.body[:80]!r}") from None


def _logprob(raw: Any, where: str) -> float:
    """A logprob of the answer, or _BadAnswer: NaN, inf, text or > 0 never count as agreement."""
    problem = logprob_problem(raw)
    if problem is not None:
        raise _BadAnswer(f"the server returned {problem} {where}")
    return float(raw)


def _parse_greedy(prompt: str, answer: Any, max_tokens: int) -> ProbeResult:
    choice = _choice(answer)
    token_ids = _int_list(choice.get("token_ids"), "token_ids")
    prompt_ids = _int_list(choice.get("prompt_token_ids"), "prompt_token_ids")
    if len(token_ids) > max_tokens:
        raise _BadAnswer(f"answer has {len(token_ids)} tokens, {max_tokens} were asked")
    if not token_ids:
        raise _BadAnswer("answer has no generated tokens (ignore_eos asked for them)")
    lp = choice.get("logprobs")
    raw = lp.get("token_logprobs") if isinstance(lp, dict) else None
    if not isinstance(raw, list) or len(raw) != len(token_ids):
        raise _BadAnswer("answer's logprobs do not match its tokens")
    logprobs: list[float | None] = [
        _logprob(v, f"for generated token {i}") for i, v in enumerate(raw)
    ]
    return ProbeResult(prompt, prompt_ids, token_ids, logprobs)


def _parse_forced(answer: Any, prompt_len: int, forced: list[int]) -> list[float | None]:
    raw = _choice(answer).get("prompt_logprobs")
    if not isinstance(raw, list) or len(raw) != prompt_len + len(forced):
        raise _BadAnswer("answer has no prompt_logprobs for every prompt token")
    out: list[float | None] = []
    for i, (token, entry) in enumerate(zip(forced, raw[prompt_len:], strict=True)):
        item = entry.get(str(token)) if isinstance(entry, dict) else None
        if not isinstance(item, dict):
            raise _BadAnswer(f"teacher-forced answer lacks the logprob of token {i}")
        out.append(_logprob(item.get("logprob"), f"for teacher-forced token {i}"))
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
    result = _parse_greedy(prompt, _json(ans), max_tokens)
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
    result.forced_logprobs = _parse_forced(_json(ans), len(result.prompt_ids), forced)
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
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        # Whatever else a hostile answer provokes is still a failed guard with its
        # reason, never an exception that ends a trial whose results are measured.
        run.error = (
            f"probe {len(run.probes) + 1}/{len(probes)}: the server's answer could not be "
            f"read ({type(exc).__name__}: {str(exc)[:120]})"
        )
    finally:
        await client.aclose()
        run.seconds = time.monotonic() - t0
    return run
