"""Recorded conversations for the sessions kind: the user's own chats, turn by turn (issue 30).

``--dataset-kind sessions --dataset FILE`` replays conversations people or agents really had
instead of random user turns. Two formats are read, told apart by their records:

* ShareGPT: a JSON list (or JSONL) of ``{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}, ...]}``, the format of vLLM's ShareGPT dataset;
* OpenAI chat: JSONL (or a JSON list) of ``{"messages": [{"role": "system" | "user" |
  "assistant" | "tool", "content": ...}, ...]}``, what chat logs and agent traces export;
  ``content`` may be a string or a list of ``{"type": "text", "text": ...}`` parts.

Only the user's side is replayed: the recorded assistant messages are dropped, because each
turn's history carries the answers the server under test really gave (the prefix cache must
see those). A conversation's first system message opens it; consecutive user and tool
messages between two assistant messages form one turn, sent as the user's message (the
recording's tool-call ids cannot match the server's new answers, so a tool result goes as
text). Reading is bounded like every dataset (tuner.bench.prompts.read_dataset) and parsed
once per file version; a bad record is a WorkloadError naming its line or index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.bench.prompts import cached_parse, parse_json, read_dataset
from tuner.bench.workload import WorkloadError

__all__ = ["RecordedConversation", "recorded_conversations"]

MAX_CONVERSATIONS = 1_000_000

_FIX = (
    'ShareGPT: [{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", '
    '"value": "..."}]}] or OpenAI chat JSONL: {"messages": [{"role": "user", "content": '
    '"..."}, {"role": "assistant", "content": "..."}]} per line'
)
_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}


@dataclass(frozen=True)
class RecordedConversation:
    """The user's side of one recorded conversation.

    Attributes:
        system: Its first system message ("" for none).
        user_turns: Each turn's user (and tool) text, in order.
        where: The record it came from ("line 7", "entry 3"), for messages.
    """

    system: str
    user_turns: tuple[str, ...]
    where: str


def recorded_conversations(path_text: str) -> tuple[RecordedConversation, ...]:
    """The conversations of a ShareGPT or OpenAI-chat file with at least one user turn.

    Raises:
        WorkloadError: Unreadable or unbounded file, a record that is not a conversation of
            either format, or no conversation with a user turn.
    """
    path = Path(path_text).expanduser()
    return cached_parse(path, "conversations", lambda: _parse(path))


def _parse(path: Path) -> tuple[RecordedConversation, ...]:
    text = read_dataset(path)
    out: list[RecordedConversation] = []
    for where, record in _records(text, path):
        conv = _conversation(record, where, path)
        if conv.user_turns:
            out.append(conv)
        if len(out) > MAX_CONVERSATIONS:
            raise WorkloadError(f"dataset {path} has over {MAX_CONVERSATIONS} conversations")
    if not out:
        raise WorkloadError(f"dataset {path} has no conversation with a user turn", fix=_FIX)
    return tuple(out)


def _records(text: str, path: Path) -> list[tuple[str, Any]]:
    """(where, record) for a JSON list or for JSONL, one object per non-blank line."""
    if text.lstrip().startswith("["):
        data = parse_json(text, f"dataset file {path}", _FIX)
        return [(f"entry {i}", rec) for i, rec in enumerate(data)]
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"line {no}", json.loads(line)))
        except RecursionError:
            raise WorkloadError(f"{path} line {no} nests JSON too deeply") from None
        except ValueError:
            raise WorkloadError(f"{path} line {no} is not JSON", fix=_FIX) from None
    return out


def _conversation(record: Any, where: str, path: Path) -> RecordedConversation:
    """One record as the user's side of a conversation (see the module docstring)."""
    messages = _messages(record, where, path)
    system = ""
    turns: list[str] = []
    pending: list[str] = []
    for index, (role, content) in enumerate(messages):
        if role == "system":
            if index == 0:
                system = content
            continue  # a later system message is the recording's, not a turn
        if role == "assistant":
            if pending:
                turns.append("\n\n".join(pending))
                pending = []
            continue
        if content.strip():
            pending.append(content)
    if pending:
        turns.append("\n\n".join(pending))
    return RecordedConversation(system, tuple(turns), where)


def _messages(record: Any, where: str, path: Path) -> list[tuple[str, str]]:
    """The (role, text) of a ShareGPT or OpenAI-chat record."""
    if isinstance(record, dict) and isinstance(record.get("conversations"), list):
        raw, role_key, text_key = record["conversations"], "from", "value"
    elif isinstance(record, dict) and isinstance(record.get("messages"), list):
        raw, role_key, text_key = record["messages"], "role", "content"
    else:
        raise WorkloadError(
            f"{path} {where} is not a conversation: it needs a `conversations` (ShareGPT) "
            "or `messages` (OpenAI chat) list",
            fix=_FIX,
        )
    out = []
    for k, message in enumerate(raw):
        role = (
            _ROLES.get(str(message.get(role_key, "")).lower())
            if isinstance(message, dict)
            else None
        )
        if role is None:
            raise WorkloadError(
                f"{path} {where} message {k} has no known {role_key!r} "
                f"(one of {', '.join(sorted(_ROLES))})",
                fix=_FIX,
            )
        out.append((role, _text(message.get(text_key), f"{path} {where} message {k}")))
    return out


def _text(content: Any, what: str) -> str:
    """A message's text: a string, or the text parts of a content list (images dropped)."""
    if content is None:
        return ""  # an assistant message that only calls a tool
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts)
    raise WorkloadError(f"{what}: content must be text or a list of text parts", fix=_FIX)
