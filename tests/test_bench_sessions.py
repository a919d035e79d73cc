"""Multi-turn sessions (issue 30): each turn is the whole history, answers included.

Checked against the requests really sent: the programmable stub logs each
prompt whole (``log_prompts``), and the expected prompt of every turn is
rebuilt here from the seeded user turns (``plan_sessions``) and the stub's
known answer (" tok" per token), for the completions and the chat endpoint.
Also: conversations open at once stay within --concurrency, a failed turn
ends its conversation, --max-context cuts turns (counted), the per-turn
figures, the CLI's per-turn table, the workload's checks; and on the real
CPU engine, that the prompt grows turn by turn and the engine's prefix cache
hits the history.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.openai_stub import StubProcess
from tuner.bench import Workload, WorkloadError, run_benchmark
from tuner.bench.prompts import TokenPool, pool_from_tokenizer
from tuner.bench.sessions import SEPARATOR, history_prompt, plan_sessions, turn_figures


def sessions(**kw: object) -> Workload:
    base: dict[str, object] = dict(dataset_kind="sessions", num_prompts=3, turns=3,
                                   input_len=12, output_len=4, seed=5)  # fmt: skip
    return Workload(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProcess]:
    with StubProcess({"ttft_ms": 2, "itl_ms": 1, "log_prompts": True}) as s:
        yield s


@pytest.fixture(scope="module")
def pool(demo_model_path: Path) -> TokenPool:
    return pool_from_tokenizer(demo_model_path)


def answer(n: int) -> str:
    """What the stub streams for n tokens."""
    return " tok" * n


async def run(stub: StubProcess, wl: Workload, demo_model_path: Path, **plan: object):
    stub.reset({"ttft_ms": 2, "itl_ms": 1, "log_prompts": True, **plan})
    async with asyncio.timeout(60):
        return await run_benchmark(stub.url, None, wl, tokenizer_path=str(demo_model_path))


# ---- the plan and the prompts ----------------------------------------------------------


def test_the_plan_is_seeded_and_needs_text(pool: TokenPool) -> None:
    a, b = plan_sessions(sessions(), pool), plan_sessions(sessions(), pool)
    assert a == b and len(a.conversations) == 3 and a.requests == 9
    assert all(len(c.user_turns) == 3 for c in a.conversations)
    assert plan_sessions(sessions(seed=6), pool) != a
    with pytest.raises(WorkloadError, match="tokenizer"):
        plan_sessions(sessions(), TokenPool(ids=(1, 2, 3), decode=None, source="ids"))
    think = plan_sessions(sessions(think_time_s=2.0), pool).conversations[0].think_s
    assert len(think) == 3 and all(t > 0 for t in think) and len(set(think)) == 3


def test_a_turn_is_the_history_with_the_answers() -> None:
    p = history_prompt(["u1", "u2", "u3"], ["a1", "a2"], 7, chat=False)
    assert p.prompt == SEPARATOR.join(["u1", "a1", "u2", "a2", "u3"]) and p.output_len == 7
    c = history_prompt(["u1", "u2"], ["a1"], 7, chat=True)
    assert c.messages == (("user", "u1"), ("assistant", "a1"), ("user", "u2"))
    assert history_prompt(["u1"], [], 3, chat=False).prompt == "u1"


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"dataset_kind": "", "turns": 2}, "turns describes multi-turn"),
        ({"dataset_kind": "", "turns": 1, "think_time_s": 1.0}, "think_time_s describes"),
        ({"turns": 0}, "turns must be >= 1"),
        ({"think_time_s": -1.0}, "think_time_s must be 0 to"),
        ({"duration_s": 5.0}, "drop --duration"),
        ({"prefix_len": 32}, "--prefix-groups N >= 1"),
    ],
)
def test_the_workload_says_what_is_wrong(fields: dict[str, object], words: str) -> None:
    with pytest.raises(WorkloadError, match=words):
        sessions(**fields)


def test_the_sessions_fields_round_trip_and_stay_out_of_other_keys() -> None:
    wl = sessions(think_time_s=0.5, max_context=900)
    data = wl.to_dict()
    assert (data["turns"], data["think_time_s"], data["max_context"]) == (3, 0.5, 900)
    assert Workload.from_dict(data) == wl
    assert not {"turns", "think_time_s", "max_context"} & set(Workload().to_dict())


# ---- against the stub: what was sent ---------------------------------------------------


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_each_turn_sends_the_history_and_the_real_answers(
    stub: StubProcess, demo_model_path: Path, pool: TokenPool, endpoint: str
) -> None:
    wl = sessions(concurrency=2, think_time_s=0.01, endpoint=endpoint)
    res = await run(stub, wl, demo_model_path)
    assert res.completed == 9 and res.failed == 0
    plan = plan_sessions(wl, pool)
    sent = {entry["prompt"] if endpoint == "completions" else tuple(map(tuple, entry["prompt"]))
            for entry in stub.log()}  # fmt: skip
    for conv in plan.conversations:
        answers: list[str] = []
        for k in range(3):
            want = history_prompt(conv.user_turns[: k + 1], answers, 4, endpoint == "chat")
            assert (want.prompt if endpoint == "completions" else want.messages) in sent
            answers.append(answer(4))
    # The records say which conversation and turn they are; the history grows.
    by_conv: dict[int, list[int]] = {}
    for rec in sorted(res.records, key=lambda r: (r.session, r.turn)):
        by_conv.setdefault(rec.session, []).append(rec.prompt_len)
    assert sorted(by_conv) == [0, 1, 2]
    for lens in by_conv.values():
        assert len(lens) == 3 and lens[0] < lens[1] < lens[2]
        assert lens[1] - lens[0] >= 4  # the answer (4 words at the stub) went back
    figures = res.to_dict()["tunelab"]["sessions"]["turns"]
    assert [f["turn"] for f in figures] == [1, 2, 3]
    assert (
        figures[0]["mean_prompt_len"]
        < figures[1]["mean_prompt_len"]
        < figures[2]["mean_prompt_len"]
    )
    assert all(f["median_ttft_ms"] > 0 and f["completed"] == 3 for f in figures)


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_the_agentic_case_opens_every_conversation_with_a_shared_system_prompt(
    stub: StubProcess, demo_model_path: Path, pool: TokenPool, endpoint: str
) -> None:
    """--prefix-len/--prefix-groups with sessions: one system/tool prompt shared by all
    conversations (a ``system`` message in chat), before each conversation's history."""
    wl = sessions(prefix_len=24, prefix_groups=1, endpoint=endpoint, turns=2)
    res = await run(stub, wl, demo_model_path)
    assert res.completed == 6
    plan = plan_sessions(wl, pool)
    system = plan.conversations[0].system
    assert system and all(c.system == system for c in plan.conversations)
    for entry in stub.log():
        sent = entry["prompt"]
        if endpoint == "chat":
            assert sent[0] == ["system", system] and sent[1][0] == "user"
        else:
            assert sent.startswith(system + SEPARATOR)
    two = plan_sessions(sessions(prefix_len=24, prefix_groups=2), pool).conversations
    assert two[0].system != two[1].system and two[0].system == two[2].system


async def test_conversations_open_at_once_stay_within_the_concurrency(
    stub: StubProcess, demo_model_path: Path
) -> None:
    res = await run(stub, sessions(num_prompts=5, turns=2, concurrency=2), demo_model_path)
    spans: dict[int, tuple[float, float]] = {}
    for rec in res.records:
        lo, hi = spans.get(rec.session, (rec.start, rec.end))
        spans[rec.session] = (min(lo, rec.start), max(hi, rec.end))
    points = sorted(t for s in spans.values() for t in s)
    most = max(sum(1 for lo, hi in spans.values() if lo <= t < hi) for t in points)
    assert len(spans) == 5 and most == 2


async def test_a_failed_turn_ends_its_conversation(
    stub: StubProcess, demo_model_path: Path
) -> None:
    fault = {"seq": [0], "kind": "http", "status": 500, "message": "boom"}
    res = await run(stub, sessions(concurrency=1), demo_model_path, faults=[fault])
    assert len(res.records) == 7 and res.failed == 1  # 1 failed turn, its 2 never sent
    first = [r for r in res.records if r.session == 0]
    assert len(first) == 1 and not first[0].success


async def test_the_context_limit_cuts_turns_and_counts_them(
    stub: StubProcess, demo_model_path: Path, pool: TokenPool
) -> None:
    wl = sessions(max_context=45, concurrency=1)  # turn 1 ~16, turn 2 ~32, turn 3 ~48 tokens
    res = await run(stub, wl, demo_model_path)
    assert {r.turn for r in res.records} == {1, 2}
    assert res.turns_cut == 3 and res.to_dict()["tunelab"]["sessions"]["cut"] == 3


def test_turn_figures_of_a_plain_run_are_empty() -> None:
    assert turn_figures([]) == []


def test_the_cli_prints_a_turn_table(stub: StubProcess, demo_model_path: Path) -> None:
    from tuner.cli.app import app, register_all

    register_all(app)
    stub.reset({"ttft_ms": 2, "itl_ms": 1})
    args = ["bench", "--url", stub.url, "--dataset-kind", "sessions", "--turns", "3",
            "--num-prompts", "2", "--input-len", "12", "--output-len", "4",
            "--tokenizer", str(demo_model_path)]  # fmt: skip
    r = CliRunner().invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "Per turn" in r.output and "prompt tokens" in r.output
    bad = CliRunner().invoke(app, [*args[:3], "--turns", "2"], catch_exceptions=False)
    assert bad.exit_code == 2 and "turns describes multi-turn" in bad.output


# ---- on the real CPU engine --------------------------------------------------------------


@pytest.mark.engine
def test_on_the_engine_the_history_grows_and_its_prefix_is_cached(
    cpu_engine, demo_model_path: Path
) -> None:
    """4 conversations of 3 turns of 200 tokens (answers 32) on the shared CPU engine.

    A turn's prompt holds every earlier turn and the engine's own answers, so
    its prompt tokens (the engine's usage) grow by about a turn and an answer,
    and the engine's prefix cache hits the whole blocks of the history: by
    the block arithmetic ~40 % of prompt tokens with 128-token blocks, where
    single prompts of random content get none (the trace test shows that).
    """
    wl = sessions(num_prompts=4, turns=3, input_len=200, output_len=32, concurrency=2,
                  seed=30_101)  # fmt: skip
    res = asyncio.run(run_benchmark(cpu_engine.url, cpu_engine.served_model, wl,
                                    tokenizer_path=str(demo_model_path)))  # fmt: skip
    assert res.completed == 12, res.failures.describe()
    for conv in range(4):
        lens = [
            r.prompt_len for r in sorted(res.records, key=lambda r: r.turn) if r.session == conv
        ]
        assert len(lens) == 3
        for a, b in itertools.pairwise(lens):
            assert b - a >= 200 + 32 - 20, lens  # a user turn and an answer, within tokenisation
    hit = res.server.prefix_cache_hit_rate
    figures = [t.median_ttft_ms for t in turn_figures(res.records)]
    print(f"\nsessions: prompt tokens per turn "
          f"{[round(t.mean_prompt_len) for t in turn_figures(res.records)]}, "
          f"TTFT p50 per turn {[round(x, 1) for x in figures]} ms, prefix-cache hit rate {hit}")  # fmt: skip
    assert hit is not None and hit > 0.2
