"""Where a run's model name and prompt tokens come from, before any request is timed.

The served model is asked of ``/v1/models`` when none is given; the prompt
tokens come from the first source that has them (``--tokenizer``, a local
model directory or the Hugging Face cache, the server's ``root``, its
``/tokenize``), and the dataset kind decides how prompts and warm-ups are
built from them (tuner.bench.prompts, tuner.bench.datasets). Every failure
is a one-line BenchError naming the option that fixes it.
"""

from __future__ import annotations

import dataclasses

from tuner.bench.client import BenchClient
from tuner.bench.control import ControlError
from tuner.bench.datasets import (
    TraceReplay,
    check_dataset,
    jsonl_prompts,
    prefix_prompts,
    trace_requests,
)
from tuner.bench.errors import BenchError
from tuner.bench.prompts import (
    Prompt,
    TokenPool,
    filler_text,
    local_tokenizer_for,
    pool_from_server_tokens,
    pool_from_tokenizer,
    random_prompts,
    sharegpt_prompts,
)
from tuner.bench.sessions import SessionPlan, plan_sessions
from tuner.bench.workload import DatasetKind, Workload, WorkloadError

_TOKEN_OPTIONS = (
    "pass --tokenizer PATH (a tokenizer.json or the model directory), or --model with a "
    "local model directory or a model in the Hugging Face cache"
)


async def resolve_model(client: BenchClient) -> tuple[str, str | None]:
    """The first model the server serves, and its ``root`` (local path, if any).

    Any shape of answer is handled (issue 19: a list, a dict-shaped ``data``,
    a non-string ``root`` or non-JSON crashed it): what is not an
    OpenAI-style model list is a BenchError saying to pass --model.
    """
    where = f"{client.base_url}/v1/models"
    try:
        data = await client.get_json("/v1/models")
    except ControlError as exc:
        raise BenchError(
            f"cannot reach {where} (it {exc}); is the server running and the URL right "
            "(e.g. http://127.0.0.1:8000)? Or pass --model NAME"
        ) from None
    models = data.get("data") if isinstance(data, dict) else None
    first = models[0] if isinstance(models, list) and models else None
    model_id = first.get("id") if isinstance(first, dict) else None
    if not isinstance(model_id, str) or not model_id.strip():
        raise BenchError(f"{where} lists no usable model; pass --model NAME")
    root = first.get("root") if isinstance(first, dict) else None
    return model_id, root if isinstance(root, str) and root else None


async def server_root(client: BenchClient) -> str | None:
    """The served model's ``root`` when the server says (None on any trouble)."""
    try:
        _, root = await resolve_model(client)
    except BenchError:
        return None
    return root


async def token_pool(
    client: BenchClient, tokenizer_path: str | None, model_arg: str | None, root: str | None
) -> TokenPool:
    """Prompt tokens, from the first source that has them (issue 19 "Then" 1).

    Order: ``--tokenizer``; ``--model`` when it is a local model directory or
    in the Hugging Face cache (as `vllm bench serve` does); the server's
    ``root`` from /v1/models; the server's /tokenize. A /tokenize that is
    missing, empty, non-JSON or wrong-shaped is a one-line BenchError
    naming the options.
    """
    if tokenizer_path:
        return pool_from_tokenizer(tokenizer_path)
    for candidate in (model_arg, root if root is not None else await server_root(client)):
        found = local_tokenizer_for(candidate)
        if found is not None:
            return pool_from_tokenizer(found)
    where = f"{client.base_url}/tokenize"
    try:
        data = await client.post_json(
            "/tokenize",
            {"model": client.model, "prompt": filler_text(), "add_special_tokens": False},
        )
    except ControlError as exc:
        raise BenchError(f"no local tokenizer, and {where} {exc}; {_TOKEN_OPTIONS}") from None
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in tokens
    ):
        raise BenchError(
            f"no local tokenizer, and {where} did not answer with a list of token ids "
            f"(got {type(tokens if isinstance(data, dict) else data).__name__}); " + _TOKEN_OPTIONS
        )
    try:
        return pool_from_server_tokens(tokens, None)
    except WorkloadError as exc:
        raise BenchError(f"{exc}; {_TOKEN_OPTIONS}") from None


async def build_prompts(
    client: BenchClient,
    workload: Workload,
    tokenizer_path: str | None,
    model: str | None,
    root: str | None,
) -> tuple[list[Prompt], list[Prompt], str, TraceReplay | None]:
    """(prompts, warm-ups, where prompts came from, the trace's replay or None) for the dataset.

    A dataset file is read and checked first (kept for the prompts built below),
    so a bad file is named before the server is asked for anything.
    """
    check_dataset(workload)
    kind = workload.source_kind
    n, n_warm = workload.num_prompts, workload.warmup_requests
    if kind is DatasetKind.SHAREGPT:
        prompts = sharegpt_prompts(workload, n)
        return prompts, sharegpt_prompts(workload, n_warm, salt=1), str(workload.dataset_path), None
    if kind is DatasetKind.JSONL:
        warm = jsonl_prompts(workload, n_warm, salt=1)
        return jsonl_prompts(workload, n), warm, str(workload.dataset_path), None
    pool = await token_pool(client, tokenizer_path, model, root)
    if kind is DatasetKind.TRACE:
        trace = trace_requests(workload, pool)
        warm = random_prompts(workload, pool, n_warm, salt=1)
        return trace.prompts, warm, f"trace {workload.dataset_path} ({pool.source})", trace
    if kind is DatasetKind.PREFIX:
        warm = prefix_prompts(workload, pool, n_warm, salt=1)
        return prefix_prompts(workload, pool, n), warm, pool.source, None
    warm = random_prompts(workload, pool, n_warm, salt=1)
    return random_prompts(workload, pool, n), warm, pool.source, None


async def build_sessions(
    client: BenchClient,
    workload: Workload,
    tokenizer_path: str | None,
    model: str | None,
    root: str | None,
) -> tuple[SessionPlan, list[Prompt], TokenPool]:
    """(the conversations, warm-ups, the token pool) of a sessions workload.

    Raises:
        WorkloadError: No tokenizer to decode the user turns to text.
    """
    pool = await token_pool(client, tokenizer_path, model, root)
    plan = plan_sessions(workload, pool)
    if pool.decode is None and workload.dataset_path:
        # Recorded turns need no decoder, random warm-ups do: warm up on the file's first
        # turns then (they also warm the prefix cache for those turns; said in the docs).
        firsts = [c.user_turns[0] for c in plan.conversations]
        warm = [
            Prompt(firsts[i % len(firsts)], -1, workload.output_len)
            for i in range(workload.warmup_requests)
        ]
        return plan, warm, pool
    warm = random_prompts(
        dataclasses.replace(workload, text_prompts=True), pool, workload.warmup_requests, salt=1
    )
    return plan, warm, pool
