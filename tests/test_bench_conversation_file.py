"""Sessions from recorded conversations: a ShareGPT or OpenAI-chat file's user turns, replayed
turn by turn with the server's real answers in each history (issue 30).

The parse is checked record by record (both formats, tool results, content parts, system
prompts, the errors that name a line); the replay against the OpenAI stub asserts what was
sent: every turn is the file's user turns so far with the answers the server gave.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openai_stub import StubProcess
from tuner.bench import Workload, WorkloadError, run_benchmark
from tuner.bench.conversation_file import recorded_conversations
from tuner.bench.datasets import check_dataset
from tuner.bench.prompts import TokenPool, pool_from_tokenizer
from tuner.bench.sessions import history_prompt, plan_sessions

SHAREGPT = [
    {
        "conversations": [
            {"from": "system", "value": "You are terse."},
            {"from": "human", "value": "What is KV cache?"},
            {"from": "gpt", "value": "Stored keys and values."},
            {"from": "human", "value": "And paged attention?"},
            {"from": "gpt", "value": "Blocks of it."},
            {"from": "human", "value": "Thanks."},
        ]
    },
    {"conversations": [{"from": "gpt", "value": "an answer with no question"}]},
    {"conversations": [{"from": "human", "value": "One turn only."}]},
]
CHAT = [
    {
        "messages": [
            {"role": "system", "content": "You call tools."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"},
                                         {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "content": "{\"temp\": 3}"},
            {"role": "user", "content": "In Fahrenheit?"},
            {"role": "assistant", "content": "37 F."},
            {"role": "user", "content": "And tomorrow?"},
        ]
    },
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]},
]  # fmt: skip


def write(tmp_path: Path, name: str, records: list[dict[str, object]], jsonl: bool) -> str:
    path = tmp_path / name
    text = "\n".join(json.dumps(r) for r in records) if jsonl else json.dumps(records)
    path.write_text(text)
    return str(path)


def sessions(path: str, **kw: object) -> Workload:
    base: dict[str, object] = dict(dataset_kind="sessions", dataset_path=path, num_prompts=2,
                                   output_len=4, seed=5)  # fmt: skip
    return Workload(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProcess]:
    with StubProcess({"ttft_ms": 2, "itl_ms": 1, "log_prompts": True}) as s:
        yield s


@pytest.fixture(scope="module")
def pool(demo_model_path: Path) -> TokenPool:
    return pool_from_tokenizer(demo_model_path)


# ---- the parse ----------------------------------------------------------------------------


@pytest.mark.parametrize("jsonl", [False, True], ids=["json-list", "jsonl"])
def test_sharegpt_conversations_keep_the_user_side_and_the_system_prompt(
    tmp_path: Path, jsonl: bool
) -> None:
    got = recorded_conversations(write(tmp_path, "s.json", SHAREGPT, jsonl))
    assert len(got) == 2  # the conversation with no user turn is skipped
    assert got[0].system == "You are terse."
    assert got[0].user_turns == ("What is KV cache?", "And paged attention?", "Thanks.")
    assert got[1].user_turns == ("One turn only.",) and got[1].system == ""


def test_openai_chat_tool_results_join_the_next_user_turn_and_text_parts_are_read(
    tmp_path: Path,
) -> None:
    got = recorded_conversations(write(tmp_path, "c.jsonl", CHAT, jsonl=True))
    assert got[0].system == "You call tools."
    assert got[0].user_turns == (
        "Weather in Oslo?",
        '{"temp": 3}\n\nIn Fahrenheit?',  # the tool result and the user's next words
        "And tomorrow?",
    )
    assert got[1].user_turns == ("Hi",)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"messages": []}\nnot json\n', "line 2 is not JSON"),
        ('{"prompt": "x"}\n', "line 1 is not a conversation"),
        ('{"messages": [{"role": "wizard", "content": "x"}]}\n', "message 0 has no known 'role'"),
        ('{"messages": [{"role": "user", "content": 7}]}\n', "content must be text"),
        ('{"messages": [{"role": "assistant", "content": "x"}]}\n', "no conversation with a user"),
        ("[1, 2]", "entry 0 is not a conversation"),
    ],
)
def test_a_bad_record_is_named_with_its_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(WorkloadError, match=words):
        check_dataset(sessions(str(path)))


def test_a_missing_file_is_refused_before_any_engine_starts(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"nope\.jsonl"):
        check_dataset(sessions(str(tmp_path / "nope.jsonl")))


# ---- the plan -----------------------------------------------------------------------------


def test_the_plan_draws_conversations_by_the_seed_and_caps_their_turns(
    tmp_path: Path, pool: TokenPool
) -> None:
    path = write(tmp_path, "s.json", SHAREGPT, jsonl=False)
    plan = plan_sessions(sessions(path, num_prompts=5), pool)
    assert plan == plan_sessions(sessions(path, num_prompts=5), pool)
    turns = sorted(c.user_turns for c in plan.conversations)
    assert {t for t in turns} == {got.user_turns for got in recorded_conversations(path)}
    assert plan.requests == sum(len(t) for t in turns)
    assert all(len(c.output_lens) == len(c.user_turns) for c in plan.conversations)
    capped = plan_sessions(sessions(path, num_prompts=5, turns=2), pool)
    assert max(len(c.user_turns) for c in capped.conversations) == 2
    # No decoder is needed: the user turns are the file's text.
    ids_only = TokenPool(ids=(1, 2, 3), decode=None, source="ids")
    assert plan_sessions(sessions(path), ids_only).requests >= 1


# ---- against the stub: what was sent ------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_each_turn_sends_the_file_s_turns_and_the_server_s_answers(
    stub: StubProcess, demo_model_path: Path, pool: TokenPool, tmp_path: Path, endpoint: str
) -> None:
    path = write(tmp_path, "c.jsonl", CHAT, jsonl=True)
    wl = sessions(path, endpoint=endpoint, concurrency=2, num_prompts=2)
    stub.reset({"ttft_ms": 2, "itl_ms": 1, "log_prompts": True})
    async with asyncio.timeout(60):
        res = await run_benchmark(stub.url, None, wl, tokenizer_path=str(demo_model_path))
    plan = plan_sessions(wl, pool)
    assert res.completed == plan.requests and res.failed == 0
    logged = [e["prompt"] for e in stub.log()]
    sent = {p if endpoint == "completions" else tuple(map(tuple, p)) for p in logged}
    for conv in plan.conversations:
        answers: list[str] = []
        for k, out_len in enumerate(conv.output_lens):
            want = history_prompt(
                conv.user_turns[: k + 1], answers, out_len, endpoint == "chat", conv.system
            )
            assert (want.prompt if endpoint == "completions" else want.messages) in sent
            answers.append(" tok" * out_len)  # what the stub streams
    lens = {}
    for rec in res.records:
        lens.setdefault(rec.session, []).append((rec.turn, rec.prompt_len))
    for turns in lens.values():
        ordered = [n for _, n in sorted(turns)]
        assert ordered == sorted(ordered) and len(set(ordered)) == len(ordered)
