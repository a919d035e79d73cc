"""Datasets users tune with (issue 19 "Then" 8): their prompts, shared prefixes, their traffic.

Beside random tokens and ShareGPT (tuner.bench.prompts):

* ``jsonl``: one ``{"prompt": "...", "output_len": N}`` per line (output_len
  optional: the workload's), sent as text, shuffled by the seed.
* ``prefix``: random-token prompts where request i starts with shared prefix
  i mod prefix_groups (prefix_len tokens each) followed by input_len random
  tokens — what prefix caching (``--enable-prefix-caching``) is tuned on,
  like vLLM's ``prefix_repetition`` dataset
  (vllm/benchmarks/datasets.py PrefixRepetitionRandomDataset).
* ``trace``: one ``{"timestamp": s, "input_len": n, "output_len": m}`` per
  line (random tokens of its lengths), or a Mooncake trace (``timestamp`` in
  ms, ``input_length``, ``output_length``, ``hash_ids``: prompts that share
  token blocks where the ids say, tuner.bench.trace); each request is
  released at its timestamp (relative to the first, times --time-scale),
  replacing the rate/burstiness schedule — "tune for my traffic".

Files are read whole through tuner.bounded (regular files only, at most
MAX_DATASET_BYTES counted while reading, MAX_RECORDS records) and every bad
line is a WorkloadError naming the file and line. :func:`check_dataset` reads
and checks a workload's file before any engine starts (``presets verify``,
``jobs run-spec``); the parse is kept for the trials that follow
(tuner.bench.prompts.cached_parse).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tuner.bench.conversation_file import recorded_conversations
from tuner.bench.prompts import (
    MAX_DATASET_BYTES,
    Prompt,
    TokenPool,
    cached_parse,
    random_prompts,
    read_dataset,
    sharegpt_texts,
)
from tuner.bench.trace import TraceReplay, TraceRow, replay, trace_rows
from tuner.bench.workload import MAX_LEN, DatasetKind, Workload, WorkloadError

__all__ = [
    "MAX_DATASET_BYTES",
    "MAX_LEN",
    "MAX_RECORDS",
    "TraceReplay",
    "check_dataset",
    "jsonl_prompts",
    "prefix_prompts",
    "trace_requests",
]

MAX_RECORDS = 1_000_000


def check_dataset(workload: Workload) -> None:
    """Read and check the workload's dataset file now, before any engine starts.

    Why: a trial reads its dataset only once its engine is up; a file that is
    missing, a FIFO, too large or malformed would then fail every trial of a
    study, minutes in. Random and prefix workloads have no file: nothing to do.

    Raises:
        WorkloadError: The file cannot be a dataset of the workload's kind.
    """
    kind = workload.source_kind
    path = str(workload.dataset_path)
    if kind is DatasetKind.SHAREGPT:
        sharegpt_texts(path)
    elif kind is DatasetKind.JSONL:
        _jsonl_items(path, workload.output_len)
    elif kind is DatasetKind.TRACE:
        _trace_rows(path)
    elif kind is DatasetKind.SESSIONS and workload.dataset_path:
        recorded_conversations(path)


def _records(path_text: str | None) -> tuple[dict[str, Any], ...]:
    """The JSON objects of a JSONL file, one per non-blank line (kept per file version)."""
    if not path_text:
        raise WorkloadError("this dataset needs --dataset FILE.jsonl")
    path = Path(path_text).expanduser()
    return cached_parse(path, "jsonl", lambda: _parse_records(path))


def _parse_records(path: Path) -> tuple[dict[str, Any], ...]:
    lines = read_dataset(path).splitlines()
    out: list[dict[str, Any]] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except RecursionError:
            raise WorkloadError(f"{path} line {no} nests JSON too deeply") from None
        except ValueError:
            raise WorkloadError(f"{path} line {no} is not JSON") from None
        if not isinstance(rec, dict):
            raise WorkloadError(f"{path} line {no} is not a JSON object")
        rec["_line"] = no
        out.append(rec)
        if len(out) > MAX_RECORDS:
            raise WorkloadError(f"dataset {path} has over {MAX_RECORDS} records")
    if not out:
        raise WorkloadError(f"dataset {path} has no records")
    return tuple(out)


def _length(rec: dict[str, Any], key: str, path: str, default: int | None = None) -> int:
    value = rec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LEN:
        raise WorkloadError(
            f"{path} line {rec['_line']}: {key} must be a whole number of tokens from 1 to "
            f"{MAX_LEN}, got {value!r}"
        )
    return value


def jsonl_prompts(workload: Workload, count: int, *, salt: int = 0) -> list[Prompt]:
    """``count`` prompts from a custom JSONL file (cycled, shuffled by the seed)."""
    items = _jsonl_items(str(workload.dataset_path), workload.output_len)
    rng = random.Random(workload.seed * 1_000_003 + salt)
    rng.shuffle(items)
    return [Prompt(items[i % len(items)][0], -1, items[i % len(items)][1]) for i in range(count)]


def _jsonl_items(path: str, default_output_len: int) -> list[tuple[str, int]]:
    """(prompt, output_len) of each record of a custom JSONL file, checked."""
    items: list[tuple[str, int]] = []
    for rec in _records(path):
        prompt = rec.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise WorkloadError(f"{path} line {rec['_line']}: 'prompt' must be non-empty text")
        items.append((prompt, _length(rec, "output_len", path, default_output_len)))
    return items


def shared_prefixes(workload: Workload, pool: TokenPool) -> list[list[int]]:
    """``prefix_groups`` seeded prefixes of ``prefix_len`` token ids: the "prefix" kind's
    shared prefixes, and the sessions kind's shared system prompts (the same draw)."""
    rng = random.Random(workload.seed * 7_777_777 + 5)  # same prefixes for warm-ups too
    ids = pool.ids
    return [
        [ids[rng.randrange(len(ids))] for _ in range(workload.prefix_len)]
        for _ in range(workload.prefix_groups)
    ]


def prefix_prompts(
    workload: Workload, pool: TokenPool, count: int, *, salt: int = 0
) -> list[Prompt]:
    """Random prompts, request i opening with shared prefix i mod prefix_groups."""
    prefixes = shared_prefixes(workload, pool)
    suffixes = random_prompts(workload, pool, count, salt=salt)
    out: list[Prompt] = []
    for i, p in enumerate(suffixes):
        head = prefixes[i % len(prefixes)]
        if isinstance(p.prompt, list):
            out.append(Prompt(head + p.prompt, len(head) + p.prompt_len, p.output_len))
        else:
            assert pool.decode is not None  # random_prompts made text, so it can decode
            out.append(Prompt(pool.decode(head) + p.prompt, -1, p.output_len))
    return out


def trace_requests(workload: Workload, pool: TokenPool) -> TraceReplay:
    """A trace's replay (tuner.bench.trace): at most num_prompts requests, in time order.

    Raises:
        WorkloadError: The file is not a trace, or its replay cannot be sent.
    """
    return replay(workload, pool, _trace_rows(str(workload.dataset_path)))


def _trace_rows(path: str) -> list[TraceRow]:
    """Each trace record, checked (either format), in time order."""
    return trace_rows(_records(path), path)
