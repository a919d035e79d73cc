"""Multi-turn conversations: each turn waits for the previous answer (issue 30).

A ``sessions`` workload is ``num_prompts`` conversations of ``turns`` turns,
``concurrency`` of them open at once (the rest start as others end, as
users arriving). A conversation sends its first user turn, waits for the
answer, pauses a think time (exponential with mean ``think_time_s``, seeded
per conversation), then sends the whole history — every earlier turn and
the real answers the server gave — plus the next user turn, as a chat client
does. So the prompt grows turn by turn and the engine's prefix cache sees
the history it would in production. A turn whose prompt would pass
``max_context`` tokens ends its conversation (counted, not sent); a failed
turn ends it too (there is no answer to continue from).

User turns are random token ids decoded to text (``input_len`` tokens
each, the run's seed), or a recorded file's (``--dataset``: ShareGPT or
OpenAI chat, tuner.bench.conversation_file): the chat endpoint gets
role-tagged messages, the completions endpoint the turns joined by blank
lines. Each record carries its conversation and turn; :func:`turn_figures`
gives the per-turn prompt length, TTFT and ITL that the result prints and
stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from tuner.bench.conversation_file import recorded_conversations
from tuner.bench.datasets import shared_prefixes
from tuner.bench.metrics import WORST_TURN_STATS, percentile
from tuner.bench.prompts import Prompt, TokenPool, random_prompts, sample_lengths
from tuner.bench.record import RequestRecord
from tuner.bench.workload import Workload, WorkloadError

__all__ = [
    "Conversation",
    "SessionPlan",
    "TurnFigures",
    "history_prompt",
    "plan_sessions",
    "run_sessions",
    "turn_figures",
]

SEPARATOR = "\n\n"
"""Between turns of a completions history: keeps each turn's tokens from merging."""


@dataclass(frozen=True)
class Conversation:
    """One conversation's user turns, fixed before the clock starts.

    Attributes:
        index: The conversation's number (0-based), stored on its records.
        user_turns: The user's text for each turn.
        output_lens: Tokens asked for each answer.
        think_s: The pause before each turn after the first (seconds).
        system: The shared system/tool prompt it opens with ("" for none).
    """

    index: int
    user_turns: tuple[str, ...]
    output_lens: tuple[int, ...]
    think_s: tuple[float, ...]
    system: str = ""


@dataclass(frozen=True)
class SessionPlan:
    """Every conversation of a sessions run, and its context limit."""

    conversations: tuple[Conversation, ...]
    max_context: int

    @property
    def requests(self) -> int:
        """Turns of all conversations (what is sent when none ends early)."""
        return sum(len(c.user_turns) for c in self.conversations)


def plan_sessions(workload: Workload, pool: TokenPool) -> SessionPlan:
    """The conversations of ``workload``, seeded: the same seed, the same user turns.

    With a ``dataset_path`` the user turns are a recorded file's
    (:func:`_recorded_plan`); else random tokens decoded to text.

    Raises:
        WorkloadError: The pool cannot decode ids to text (random user turns are text), or
            the file is not a conversations file.
    """
    if workload.dataset_path:
        return _recorded_plan(workload, pool)
    if pool.decode is None:
        raise WorkloadError(
            "multi-turn sessions send text (the answers go back in the next turn), "
            "so they need a tokenizer to decode the random user turns",
            fix="pass --tokenizer PATH (a tokenizer.json or the model directory)",
        )
    n, turns = workload.num_prompts, workload.turns
    texts = random_prompts(
        dataclasses.replace(workload, text_prompts=True), pool, n * turns, salt=7
    )
    systems = _system_prompts(workload, pool)
    out = []
    for i in range(n):
        mine = texts[i * turns : (i + 1) * turns]
        out.append(
            Conversation(
                index=i,
                user_turns=tuple(str(p.prompt) for p in mine),
                output_lens=tuple(p.output_len for p in mine),
                think_s=_think_times(workload, i, len(mine)),
                system=systems[i % len(systems)] if systems else "",
            )
        )
    return SessionPlan(tuple(out), workload.max_context)


def _recorded_plan(workload: Workload, pool: TokenPool) -> SessionPlan:
    """``num_prompts`` conversations drawn from the file (shuffled by the seed, cycled when
    it holds fewer), each cut to ``turns`` turns when ``turns`` > 1 (1, the default, keeps
    every recorded turn). Answer lengths are the workload's, as ShareGPT prompts' are, so
    runs stay comparable; a recorded system prompt opens its conversation, else the shared
    one of ``--prefix-len/--prefix-groups`` when given."""
    recorded = list(recorded_conversations(str(workload.dataset_path)))
    rng = random.Random(workload.seed * 1_000_003 + 7)
    rng.shuffle(recorded)
    cap = workload.turns if workload.turns > 1 else None
    chosen = [recorded[i % len(recorded)] for i in range(workload.num_prompts)]
    turns = [rec.user_turns[:cap] for rec in chosen]
    lengths = sample_lengths(workload, sum(len(t) for t in turns), rng)
    systems = _system_prompts(workload, pool) if workload.prefix_len else []
    out, used = [], 0
    for i, (rec, users) in enumerate(zip(chosen, turns, strict=True)):
        mine = lengths[used : used + len(users)]
        used += len(users)
        out.append(
            Conversation(
                index=i,
                user_turns=users,
                output_lens=tuple(out_len for _, out_len in mine),
                think_s=_think_times(workload, i, len(users)),
                system=rec.system or (systems[i % len(systems)] if systems else ""),
            )
        )
    return SessionPlan(tuple(out), workload.max_context)


def _think_times(workload: Workload, conversation: int, turns: int) -> tuple[float, ...]:
    """Conversation ``conversation``'s pauses: exponential, mean ``think_time_s``, seeded by
    the conversation so adding one does not move the others'."""
    mean = workload.think_time_s
    rng = random.Random(workload.seed * 1_000_033 + conversation)
    return tuple(rng.expovariate(1.0 / mean) if mean > 0 else 0.0 for _ in range(turns))


def _system_prompts(workload: Workload, pool: TokenPool) -> list[str]:
    """``prefix_groups`` shared system/tool prompts of ``prefix_len`` tokens (the agentic
    case: every conversation of a group opens with the same one, as an agent's tools do)."""
    if not (workload.prefix_len and workload.prefix_groups):
        return []
    if pool.decode is None:
        raise WorkloadError(
            "a shared system prompt is random tokens decoded to text: it needs a tokenizer",
            fix="pass --tokenizer PATH (a tokenizer.json or the model directory)",
        )
    return [pool.decode(ids) for ids in shared_prefixes(workload, pool)]


def history_prompt(
    user_turns: Sequence[str],
    answers: Sequence[str],
    output_len: int,
    chat: bool,
    system: str = "",
) -> Prompt:
    """The prompt of turn ``len(user_turns)``: the system prompt, every earlier turn and
    answer, then the new turn.

    ``answers`` holds one answer per earlier turn. The length is left to the
    server's usage report (-1): a chat template adds tokens, and text joined
    from pieces re-tokenises to about, not exactly, the sum of its parts.
    """
    assert len(answers) == len(user_turns) - 1
    if chat:
        messages: list[tuple[str, str]] = [("system", system)] if system else []
        for user, answer in zip(user_turns, answers, strict=False):
            messages += [("user", user), ("assistant", answer)]
        messages.append(("user", user_turns[-1]))
        return Prompt(user_turns[-1], -1, output_len, messages=tuple(messages))
    parts: list[str] = [system] if system else []
    for user, answer in zip(user_turns, answers, strict=False):
        parts += [user, answer]
    parts.append(user_turns[-1])
    return Prompt(SEPARATOR.join(parts), -1, output_len)


def estimated_tokens(prompt: Prompt, pool: TokenPool | None) -> int:
    """A prompt's tokens for the context limit: the pool's count, else ~4 characters a token."""
    texts = [t for _, t in prompt.messages] or [str(prompt.prompt)]
    if pool is not None and pool.count is not None:
        return sum(pool.count(t) for t in texts)
    return sum(len(t) for t in texts) // 4


# Sends one prompt and returns its record (the runner's client.send, bound to its counters).
Send = Callable[[Prompt, float], Awaitable[RequestRecord]]


@dataclass
class SessionRun:
    """The measured part of a sessions run: conversations as tasks, turns as records."""

    plan: SessionPlan
    chat: bool
    send: Send
    pool: TokenPool | None
    concurrency: int | None
    records: list[RequestRecord] = dataclasses.field(default_factory=list)
    cut_by_context: int = 0

    async def conversation(self, conv: Conversation, slots: asyncio.Semaphore | None) -> None:
        """Send a conversation's turns in order, each after the previous answer."""
        async with slots if slots is not None else contextlib.nullcontext():
            answers: list[str] = []
            for k, output_len in enumerate(conv.output_lens):
                if k and conv.think_s[k]:
                    await asyncio.sleep(conv.think_s[k])
                prompt = history_prompt(
                    conv.user_turns[: k + 1], answers, output_len, self.chat, conv.system
                )
                limit = self.plan.max_context
                if limit and estimated_tokens(prompt, self.pool) + output_len > limit:
                    self.cut_by_context += len(conv.output_lens) - k
                    return
                rec = await self.send(prompt, perf_counter())
                rec.session, rec.turn = conv.index, k + 1
                self.records.append(rec)
                if not rec.success:
                    return
                answers.append(rec.answer)

    async def run(self) -> list[RequestRecord]:
        """All conversations, ``concurrency`` open at once; the records in send order."""
        slots = asyncio.Semaphore(self.concurrency) if self.concurrency else None
        tasks = [asyncio.create_task(self.conversation(c, slots)) for c in self.plan.conversations]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return sorted(self.records, key=lambda r: r.start)


async def run_sessions(
    plan: SessionPlan,
    send: Send,
    *,
    chat: bool,
    pool: TokenPool | None,
    concurrency: int | None,
) -> tuple[list[RequestRecord], int]:
    """Run every conversation: (the turns' records in send order, turns cut by the context limit)."""
    run = SessionRun(plan, chat, send, pool, concurrency)
    records = await run.run()
    return records, run.cut_by_context


@dataclass(frozen=True)
class TurnFigures:
    """One turn's figures over the conversations that reached it.

    Attributes:
        turn: The turn (from 1).
        requests: Conversations that sent it.
        completed: Of those, answered.
        mean_prompt_len: Its prompt tokens (the server's usage), mean.
        median_ttft_ms: Time to first token, median of the answered.
        median_itl_ms: Inter-token gap, median over the answered turns' gaps.
        p90_ttft_ms: Time to first token, 90th percentile of the answered.
        p99_ttft_ms: Its 99th percentile.
    """

    turn: int
    requests: int
    completed: int
    mean_prompt_len: float
    median_ttft_ms: float
    median_itl_ms: float
    p90_ttft_ms: float = 0.0
    p99_ttft_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the result's ``tunelab.sessions.turns``)."""
        return dataclasses.asdict(self)


def turn_figures(records: Sequence[RequestRecord]) -> list[TurnFigures]:
    """Per-turn figures of a sessions run, in turn order (empty for any other run)."""
    by_turn: dict[int, list[RequestRecord]] = {}
    for rec in records:
        if rec.turn >= 1:
            by_turn.setdefault(rec.turn, []).append(rec)
    out = []
    for turn in sorted(by_turn):
        recs = by_turn[turn]
        ok = [r for r in recs if r.success]
        lens = [r.prompt_len for r in ok if r.prompt_len >= 0]
        gaps = [g for r in ok for g in r.itls]
        out.append(
            TurnFigures(
                turn=turn,
                requests=len(recs),
                completed=len(ok),
                mean_prompt_len=statistics.fmean(lens) if lens else 0.0,
                median_ttft_ms=statistics.median(r.ttft for r in ok) * 1e3 if ok else 0.0,
                median_itl_ms=statistics.median(gaps) * 1e3 if gaps else 0.0,
                p90_ttft_ms=percentile([r.ttft * 1e3 for r in ok], 90) if ok else 0.0,
                p99_ttft_ms=percentile([r.ttft * 1e3 for r in ok], 99) if ok else 0.0,
            )
        )
    return out


MIN_TURN_ANSWERS = 3  # a turn fewer conversations answered has no percentile to speak of


def worst_turn_metrics(records: Sequence[RequestRecord]) -> dict[str, float]:
    """The per-turn TTFT bounds of a sessions run: for each statistic, the worst turn's.

    An SLO on ``worst_turn_p99_ttft_ms`` holds when every turn's p99 TTFT does — the bound a
    chat product promises on every turn, which the whole run's p99 blurs as the growing
    history lengthens the later turns' prefills. Only turns at least
    :data:`MIN_TURN_ANSWERS` conversations answered count; empty for any other run.
    """
    turns = [t for t in turn_figures(records) if t.completed >= MIN_TURN_ANSWERS]
    if not turns:
        return {}
    return {
        f"worst_turn_{stat}_ttft_ms": max(getattr(t, f"{stat}_ttft_ms") for t in turns)
        for stat in WORST_TURN_STATS
    }
