"""Trace replay: a file's arrival times and lengths, and its prefix reuse (issue 30).

Two formats, told apart per file by its first record (docs/trace-replay.md):

* tunelab's own, ``{"timestamp": s, "input_len": n, "output_len": m}``: each
  request gets fresh random tokens, so the engine's prefix cache sees
  nothing to reuse.
* Mooncake's (FAST'25 traces, the format of vLLM PR #39795),
  ``{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids":
  [...]}``: one id per BLOCK_TOKENS-token block of the prompt, equal ids for
  equal content, forming a prefix chain. Block id h becomes BLOCK_TOKENS
  token ids drawn from the pool by a RNG seeded with (workload seed, h), and
  a prompt is its blocks concatenated and cut to input_length, so prompts
  share token blocks exactly where the trace says they do — what a prefix
  cache is tuned on. Timestamps are milliseconds.

A Mooncake prompt longer than its blocks (input_length > BLOCK_TOKENS x
len(hash_ids)) is padded with tokens of its own (reused by nobody); ids
beyond input_length describe no token and are ignored. The trace's
block-reuse ratio (:func:`block_reuse`) is what a perfect prefix cache could
reuse of the replayed prompts; the run stores it beside the engine's own
hit rate.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.bench.prompts import Prompt, TokenPool
from tuner.bench.workload import MAX_LEN, MAX_SECONDS, Workload, WorkloadError

__all__ = [
    "BLOCK_TOKENS",
    "TraceReplay",
    "TraceRow",
    "block_reuse",
    "replay",
    "reused_tokens",
    "trace_rows",
]

BLOCK_TOKENS = 512  # tokens per hash id in Mooncake traces
MAX_HASH_ID = 2**63 - 1  # ids are stored as 64-bit integers
MAX_TIMESTAMP = 1e15  # far above any trace's clock, in seconds or milliseconds
_MOONCAKE_KEYS = ("input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace, checked.

    Attributes:
        timestamp_s: Arrival time in seconds (Mooncake's milliseconds converted).
        input_len: Prompt tokens.
        output_len: Tokens to generate.
        hash_ids: The prompt's block ids (Mooncake), or None (tunelab's format).
        line: Line of the file, for messages and a per-request padding seed.
    """

    timestamp_s: float
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] | None
    line: int


@dataclass(frozen=True)
class TraceReplay:
    """What a trace replay sends, and how much of it a prefix cache could reuse.

    Attributes:
        prompts: The counted prompts, in arrival order.
        offsets: Release times in seconds after the first arrival (time-scaled).
        block_reuse: The trace's block-reuse ratio over these prompts
            (:func:`block_reuse`); 0 for tunelab's format (random tokens).
    """

    prompts: list[Prompt]
    offsets: list[float]
    block_reuse: float


def trace_rows(records: Sequence[dict[str, Any]], path: str) -> list[TraceRow]:
    """The checked requests of a trace file, in time order.

    The format is the first record's: a Mooncake key in it makes every record
    Mooncake, so a file that mixes the two is refused at the first stray line
    rather than half-replayed with the wrong clock.

    Raises:
        WorkloadError: A record is not a request of the file's format (file and line named).
    """
    mooncake = any(key in records[0] for key in _MOONCAKE_KEYS)
    rows = [_mooncake_row(r, path) if mooncake else _plain_row(r, path) for r in records]
    rows.sort(key=lambda row: (row.timestamp_s, row.line))
    return rows


def _where(rec: dict[str, Any], path: str) -> str:
    return f"{path} line {rec['_line']}"


def _length(rec: dict[str, Any], key: str, path: str) -> int:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LEN:
        raise WorkloadError(
            f"{_where(rec, path)}: {key} must be a whole number of tokens from 1 to "
            f"{MAX_LEN}, got {value!r}",
            fix=f"give every record a {key} from 1 to {MAX_LEN}",
        )
    return value


def _timestamp(rec: dict[str, Any], path: str, unit: str) -> float:
    ts = rec.get("timestamp")
    if not (isinstance(ts, int | float) and not isinstance(ts, bool) and abs(ts) < MAX_TIMESTAMP):
        raise WorkloadError(
            f"{_where(rec, path)}: timestamp must be a number of {unit}, got {ts!r}",
            fix=f"give every record a timestamp in {unit}",
        )
    return float(ts)


def _plain_row(rec: dict[str, Any], path: str) -> TraceRow:
    """A record of tunelab's format (seconds, input_len/output_len, random content)."""
    if any(key in rec for key in _MOONCAKE_KEYS):
        raise WorkloadError(
            f"{_where(rec, path)} is a Mooncake record in a trace that opened in tunelab's "
            "format (timestamp/input_len/output_len)",
            fix="keep one format per file",
        )
    return TraceRow(
        _timestamp(rec, path, "seconds"),
        _length(rec, "input_len", path),
        _length(rec, "output_len", path),
        None,
        rec["_line"],
    )


def _mooncake_row(rec: dict[str, Any], path: str) -> TraceRow:
    """A record of Mooncake's format (milliseconds, input_length/output_length, hash_ids)."""
    if "input_len" in rec or "output_len" in rec:
        raise WorkloadError(
            f"{_where(rec, path)} is in tunelab's trace format in a Mooncake trace "
            "(timestamp in ms, input_length, output_length, hash_ids)",
            fix="keep one format per file",
        )
    return TraceRow(
        _timestamp(rec, path, "milliseconds") / 1000.0,
        _length(rec, "input_length", path),
        _length(rec, "output_length", path),
        _hash_ids(rec, path),
        rec["_line"],
    )


def _hash_ids(rec: dict[str, Any], path: str) -> tuple[int, ...]:
    """The record's block ids: a list of whole numbers 0..MAX_HASH_ID, one per block at most."""
    ids = rec.get("hash_ids")
    fix = f"give hash_ids as a list of whole numbers from 0 to {MAX_HASH_ID}, one per block"
    if not isinstance(ids, list):
        raise WorkloadError(f"{_where(rec, path)}: hash_ids must be a list, got {ids!r}", fix=fix)
    if len(ids) > MAX_LEN // BLOCK_TOKENS + 1:
        raise WorkloadError(
            f"{_where(rec, path)}: {len(ids):,} hash_ids are more blocks than any prompt has",
            fix=fix,
        )
    for h in ids:
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HASH_ID:
            raise WorkloadError(f"{_where(rec, path)}: hash id {h!r} is not usable", fix=fix)
    return tuple(ids)


def replay(workload: Workload, pool: TokenPool, rows: list[TraceRow]) -> TraceReplay:
    """The prompts, time-scaled release offsets and block reuse of the first num_prompts rows.

    Raises:
        WorkloadError: The replayed span, time-scaled, is over MAX_SECONDS, or
            the prompts must be text and there is no tokenizer to decode them.
    """
    rows = rows[: workload.num_prompts]
    t0 = rows[0].timestamp_s
    offsets = [(row.timestamp_s - t0) * workload.time_scale for row in rows]
    if offsets[-1] > MAX_SECONDS:
        raise WorkloadError(
            f"trace {workload.dataset_path}: the replayed requests span {offsets[-1]:.3g} s "
            f"(time scale {workload.time_scale:g}), more than a week ({MAX_SECONDS:g} s)",
            fix="check the timestamps' unit, lower --time-scale, or replay fewer requests "
            "(--num-prompts)",
        )
    tokens = _token_lists(workload, pool, rows)
    prompts = [
        _prompt(workload, pool, toks, row.output_len)
        for toks, row in zip(tokens, rows, strict=True)
    ]
    return TraceReplay(prompts, offsets, block_reuse(rows))


def _token_lists(workload: Workload, pool: TokenPool, rows: list[TraceRow]) -> list[list[int]]:
    """Each row's prompt token ids: from its blocks (Mooncake), else random (one seeded RNG)."""
    rng = random.Random(workload.seed * 1_000_003)  # tunelab's format: as before issue 30
    blocks: dict[int, list[int]] = {}
    ids = pool.ids
    out: list[list[int]] = []
    for row in rows:
        if row.hash_ids is None:
            out.append([ids[rng.randrange(len(ids))] for _ in range(row.input_len)])
        else:
            out.append(_block_tokens(workload.seed, ids, row, blocks))
    return out


def _block_tokens(
    seed: int, ids: tuple[int, ...], row: TraceRow, blocks: dict[int, list[int]]
) -> list[int]:
    """A Mooncake row's prompt: its blocks' tokens in order, padded or cut to input_len.

    Why one RNG per (seed, block id), seeded with text: the same id gives the
    same tokens in every request, run and process (string seeds are hashed
    with SHA-512, not Python's randomised hash), and different ids or seeds
    give unrelated tokens.
    """
    assert row.hash_ids is not None
    toks: list[int] = []
    for h in row.hash_ids:
        if len(toks) >= row.input_len:
            break
        block = blocks.get(h)
        if block is None:
            block = random.Random(f"tunelab-trace-block:{seed}:{h}").choices(ids, k=BLOCK_TOKENS)
            blocks[h] = block
        toks.extend(block)
    short = row.input_len - len(toks)
    if short > 0:  # the prompt outruns its blocks: pad with tokens nobody else has
        pad = random.Random(f"tunelab-trace-pad:{seed}:{row.line}")
        toks.extend(pad.choices(ids, k=short))
    return toks[: row.input_len]


def _prompt(workload: Workload, pool: TokenPool, toks: list[int], output_len: int) -> Prompt:
    """Token ids as sent (completions), or their text where text must be sent."""
    if workload.endpoint == "chat" or workload.text_prompts:
        if pool.decode is None:
            raise WorkloadError(
                "a trace replayed as text needs a tokenizer: pass --tokenizer PATH",
                fix="pass --tokenizer PATH, or send token ids (--endpoint completions)",
            )
        return Prompt(pool.decode(toks), -1, output_len)
    return Prompt(toks, len(toks), output_len)


def block_reuse(rows: Sequence[TraceRow]) -> float:
    """The trace's block-reuse ratio: prompt tokens an earlier request already had, / all.

    Token-weighted over the prompts (input_len each), from
    :func:`reused_tokens`. It is what a prefix cache of unbounded size could
    reuse; vLLM's hit rate (hits / queried prompt tokens) also counts only
    whole engine blocks and always recomputes a prompt's last token
    (docs/trace-replay.md). Padding and tunelab's format (random tokens)
    count as not reused.
    """
    total = sum(row.input_len for row in rows)
    return sum(reused_tokens(rows)) / total if total else 0.0


def reused_tokens(rows: Sequence[TraceRow]) -> list[int]:
    """Per request, how many of its prompt tokens an earlier request already had.

    A block counts when the same chain of ids up to and including it (its
    prefix) appeared in an earlier request, for as many of its tokens as that
    earlier request had of it (a cut last block shares only its beginning).
    For a Mooncake trace, whose ids are prefix chains, that is "its id
    appeared before"; for a hand-made one it is what a prefix cache can
    reuse. The reused tokens of a request are therefore a prefix of it.
    """
    nodes: dict[tuple[int, int], int] = {}  # (parent node, id) -> node: a trie of id chains
    seen: dict[int, int] = {}  # node -> most tokens of that block an earlier request had
    out: list[int] = []
    for row in rows:
        reused = 0
        mine: list[tuple[int, int]] = []
        node = -1
        for k, h in enumerate(row.hash_ids or ()):
            n = min(BLOCK_TOKENS, row.input_len - k * BLOCK_TOKENS)
            if n <= 0:
                break
            node = nodes.setdefault((node, h), len(nodes))
            reused += min(n, seen.get(node, 0))
            mine.append((node, n))
        for node, n in mine:
            seen[node] = max(seen.get(node, 0), n)
        out.append(reused)
    return out
