"""Prompts of an exact token length, repeatable from a seed.

Random prompts are lists of token ids sent as the ``prompt`` of
/v1/completions, so the server sees exactly ``input_len`` tokens with no
decode/re-encode drift (vLLM's own random dataset decodes to text and loses a
few tokens on the way back). The ids come from a *token pool*: every
non-special id of the model's tokenizer (read with the light `tokenizers`
library, never transformers) or, without a local tokenizer, the ids the
server's own /tokenize endpoint returns for a filler text. Chat requests need
text, so their prompts are decoded from the same ids. A ShareGPT JSON file can
replace random prompts; its real prompt lengths come back in the server's
usage report.
"""

from __future__ import annotations

import json
import math
import os
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tuner.bench.workload import Workload, WorkloadError
from tuner.bounded import MIB, InputTooLargeError, NotAFileError, read_text

# tunelab loads a dataset file whole (as vLLM's benchmark does): a ShareGPT dump
# is ~700 MB in the wild, so 1 GiB lets it through and stops /dev/zero-like input.
MAX_DATASET_BYTES = 1024 * MIB
# A tokenizer.json is tens of MB (the largest vocabularies ~35 MB).
MAX_TOKENIZER_BYTES = 256 * MIB
_T = TypeVar("_T")
_SHAREGPT_FIX = (
    'give --dataset a ShareGPT JSON file: [{"conversations": [{"from": "human", '
    '"value": "..."}, ...]}, ...] (or --dataset-kind jsonl for one object per line)'
)

# Words for the filler text tokenised by the server when no tokenizer is local.
_FILLER = (
    "the quick brown fox jumps over a lazy dog while seven tired engineers tune "
    "engines measure latency count tokens compare numbers and write reports about "
    "throughput memory caches kernels batches schedules queues prompts outputs "
    "0 1 2 3 4 5 6 7 8 9 alpha beta gamma delta north south east west"
)


@dataclass(frozen=True)
class Prompt:
    """One request's input.

    Attributes:
        prompt: Token ids (completions) or text (chat, ShareGPT).
        prompt_len: Length in tokens when known, else -1 (the server's usage
            report fills it in).
        output_len: Tokens to request.
        messages: A conversation so far for the chat endpoint, (role, text)
            pairs ending with the user's turn (tuner.bench.sessions); empty:
            ``prompt`` is the one user message.
    """

    prompt: list[int] | str
    prompt_len: int
    output_len: int
    messages: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TokenPool:
    """Valid, non-special token ids of the served model, plus a decoder.

    Attributes:
        ids: Candidate ids for random prompts (no special tokens).
        decode: Turns ids into text (for chat prompts), or None if unknown.
        source: Where the ids came from, for the result's provenance.
        count: Tokens the server will see for a text (special tokens
            included), or None if unknown.
    """

    ids: tuple[int, ...]
    decode: Callable[[list[int]], str] | None
    source: str
    count: Callable[[str], int] | None = None


def tokenizer_file(path: str | Path) -> Path | None:
    """The tokenizer.json at ``path`` (a file or a model directory), if any."""
    p = Path(path).expanduser()
    try:
        if p.is_file():
            return p
        candidate = p / "tokenizer.json"
        return candidate if candidate.is_file() else None
    except (OSError, ValueError):  # a name too long for a path, a NUL byte
        return None


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or str(Path("~/.cache/huggingface").expanduser())
    return Path(home).expanduser() / "hub"


def local_tokenizer_for(model: str | None) -> Path | None:
    """A tokenizer.json for ``model`` without the network: a local dir, else the HF cache.

    `vllm bench serve` uses ``--model`` as the tokenizer when none is given
    (vllm/benchmarks/serve.py ~line 2094: ``tokenizer_id = args.tokenizer if ... else model_id``);
    tunelab does the same but only from disk — a repo id is looked up in the
    hub cache's ``models--ORG--NAME/snapshots/*/tokenizer.json``.
    """
    if not model:
        return None
    direct = tokenizer_file(model)
    if direct is not None:
        return direct
    if model.count("/") != 1 or model.startswith(("/", ".", "~")):
        return None
    snaps = hf_cache_dir() / ("models--" + model.replace("/", "--")) / "snapshots"
    try:
        found = sorted(snaps.glob("*/tokenizer.json"), key=lambda f: f.stat().st_mtime)
    except OSError:
        return None
    return found[-1] if found else None


def pool_from_tokenizer(path: str | Path) -> TokenPool:
    """Build a token pool from a local tokenizer.json.

    Args:
        path: tokenizer.json or a directory holding one.

    Raises:
        WorkloadError: No tokenizer.json there, or one tokenizers cannot load.
    """
    from tokenizers import Tokenizer  # light (Rust); imported here for CLI speed

    file = tokenizer_file(path)
    if file is None:
        raise WorkloadError(
            f"no tokenizer.json at {path}; pass a model directory that holds one, "
            "or leave the tokenizer unset to let the server tokenise"
        )
    text = _read_user_file(file, MAX_TOKENIZER_BYTES, "tokenizer", "--tokenizer")
    try:
        tok = Tokenizer.from_str(text)
    except Exception as exc:  # tokenizers raises a bare Exception for bad files
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise WorkloadError(
            f"cannot load the tokenizer {file} ({first}); pass --tokenizer with a valid "
            "tokenizer.json or model directory"
        ) from None
    special = {int(i) for i, t in tok.get_added_tokens_decoder().items() if t.special}
    ids = tuple(i for i in range(tok.get_vocab_size(with_added_tokens=False)) if i not in special)
    if not ids:
        raise WorkloadError(f"tokenizer {file} has no non-special tokens")
    return TokenPool(
        ids=ids,
        decode=lambda toks: tok.decode(toks, skip_special_tokens=True),
        source=str(file),
        count=lambda text: len(tok.encode(text, add_special_tokens=True).ids),
    )


MAX_TOKEN_ID = 10_000_000  # larger than any vocabulary; guards against junk ids


def pool_from_server_tokens(
    tokens: list[int], decode: Callable[[list[int]], str] | None
) -> TokenPool:
    """Wrap ids returned by the server's /tokenize into a pool (junk ids dropped)."""
    ids = tuple(
        sorted(
            {
                t
                for t in tokens
                if isinstance(t, int) and not isinstance(t, bool) and 0 <= t < MAX_TOKEN_ID
            }
        )
    )
    if not ids:
        raise WorkloadError("the server's /tokenize returned no tokens for the filler text")
    return TokenPool(ids=ids, decode=decode, source="server /tokenize")


def filler_text() -> str:
    """Text whose server-side tokens seed a pool when no tokenizer is local."""
    return _FILLER


def sample_lengths(workload: Workload, count: int, rng: random.Random) -> list[tuple[int, int]]:
    """Per-request (input_len, output_len), uniform within the range ratio.

    Same bounds as vLLM's random dataset: [floor(n * (1 - r)), ceil(n * (1 + r))],
    never below 1.
    """
    r = workload.range_ratio

    def bounds(n: int) -> tuple[int, int]:
        return max(1, math.floor(n * (1 - r))), max(1, math.ceil(n * (1 + r)))

    in_lo, in_hi = bounds(workload.input_len)
    out_lo, out_hi = bounds(workload.output_len)
    return [(rng.randint(in_lo, in_hi), rng.randint(out_lo, out_hi)) for _ in range(count)]


def random_prompts(
    workload: Workload, pool: TokenPool, count: int, *, salt: int = 0
) -> list[Prompt]:
    """Random-token prompts of exact length, identical for the same seed.

    Args:
        workload: Lengths, range ratio, seed and endpoint.
        pool: Where token ids are drawn from.
        count: How many prompts.
        salt: Separates streams drawn from one seed (warm-ups use 1).

    Raises:
        WorkloadError: Chat needs text but the pool cannot decode.
    """
    rng = random.Random(workload.seed * 1_000_003 + salt)
    ids = pool.ids
    out: list[Prompt] = []
    for in_len, out_len in sample_lengths(workload, count, rng):
        toks = [ids[rng.randrange(len(ids))] for _ in range(in_len)]
        if workload.endpoint == "chat" or workload.text_prompts:
            if pool.decode is None:
                raise WorkloadError(
                    "text prompts (chat, or text_prompts) need a tokenizer to decode "
                    "token ids; pass --tokenizer PATH or send token ids to completions"
                )
            if workload.endpoint == "chat":
                # Chat templates add tokens: the usage report has the real count.
                out.append(Prompt(pool.decode(toks), -1, out_len))
            else:
                text, n = _text_of_length(toks, in_len, pool, rng)
                out.append(Prompt(text, n, out_len))
        else:
            out.append(Prompt(toks, in_len, out_len))
    return out


def _text_of_length(
    toks: list[int], target: int, pool: TokenPool, rng: random.Random
) -> tuple[str, int]:
    """Decode ids to text whose re-encoding (special tokens included) is ``target`` long.

    Decoding and re-encoding can merge or split tokens, so trim or extend and
    retry a few times, as vLLM's random dataset does; returns the text and
    its real length (-1 if the pool cannot count).
    """
    assert pool.decode is not None
    text = pool.decode(toks)
    if pool.count is None:
        return text, -1
    n = pool.count(text)
    for _ in range(10):
        if n == target:
            break
        if n > target:
            toks = toks[: max(1, len(toks) - (n - target))]
        else:
            toks = toks + [pool.ids[rng.randrange(len(pool.ids))] for _ in range(target - n)]
        text = pool.decode(toks)
        n = pool.count(text)
    return text, n


def sharegpt_prompts(
    workload: Workload,
    count: int,
    encode: Callable[[str], int] | None = None,
    *,
    salt: int = 0,
) -> list[Prompt]:
    """Prompts from a ShareGPT-format JSON file, shuffled by the seed.

    Each conversation's first human turn is the prompt; the output length is
    the workload's (fixed or range-sampled), so runs stay comparable.

    Args:
        workload: Holds dataset_path, seed and lengths.
        count: How many prompts (the file is cycled if it holds fewer).
        encode: Counts a text's tokens, if a tokenizer is at hand.
        salt: Separates streams drawn from one seed.

    Raises:
        WorkloadError: Missing file, not ShareGPT JSON, or no usable turn.
    """
    if not workload.dataset_path:
        raise WorkloadError("sharegpt_prompts needs workload.dataset_path")
    texts = list(sharegpt_texts(workload.dataset_path))
    rng = random.Random(workload.seed * 1_000_003 + salt)
    rng.shuffle(texts)
    lengths = sample_lengths(workload, count, rng)
    out = []
    for i in range(count):
        text = texts[i % len(texts)]
        out.append(Prompt(text, encode(text) if encode else -1, lengths[i][1]))
    return out


def sharegpt_texts(path_text: str) -> tuple[str, ...]:
    """The first human turn of each conversation of a ShareGPT JSON file, in file order.

    Read once per file version (tuner.bench.prompts.cached_parse), so the check
    before an engine starts and every trial of a study share one parse.

    Raises:
        WorkloadError: Unreadable, not a bounded regular file, not ShareGPT JSON,
            or no usable turn.
    """
    path = Path(path_text).expanduser()
    return cached_parse(path, "sharegpt", lambda: _parse_sharegpt(path))


def _parse_sharegpt(path: Path) -> tuple[str, ...]:
    data: Any = parse_json(read_dataset(path), f"dataset file {path}", _SHAREGPT_FIX)
    if not isinstance(data, list):
        raise WorkloadError(
            f"dataset {path} must be a JSON list of ShareGPT conversations", fix=_SHAREGPT_FIX
        )
    texts: list[str] = []
    for entry in data:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        for turn in turns:
            if isinstance(turn, dict) and turn.get("from") in ("human", "user"):
                value = turn.get("value")
                if isinstance(value, str) and value.strip():
                    texts.append(value)
                break
    if not texts:
        raise WorkloadError(
            f"dataset {path} has no conversation with a human turn; expected ShareGPT "
            'format: [{"conversations": [{"from": "human", "value": "..."}, ...]}, ...]'
        )
    return tuple(texts)


def parse_json(text: str, what: str, fix: str) -> Any:
    """``json.loads`` whose failures, deep nesting included, are WorkloadErrors naming ``what``.

    Not tuner.bounded.loads: its nesting scan runs in Python, minutes on a 1 GiB
    dataset; the C parser's own recursion guard raises RecursionError instead.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise WorkloadError(f"{what} nests JSON too deeply to be a dataset", fix=fix) from None
    except ValueError as exc:
        raise WorkloadError(f"{what} is not valid JSON: {exc}", fix=fix) from None


def read_dataset(path: Path) -> str:
    """The text of a dataset file, at most MAX_DATASET_BYTES of it (tuner.bounded).

    Raises:
        WorkloadError: Missing, not a regular file (/dev/zero, a FIFO), larger
            than the limit, not UTF-8, or unreadable; with what to do.
    """
    return _read_user_file(
        path, MAX_DATASET_BYTES, "dataset", "--dataset (or a [workload]'s dataset_path)"
    )


def _read_user_file(path: Path, limit: int, what: str, option: str) -> str:
    """A file the user named for ``option``, read by tuner.bounded; every failure a WorkloadError."""
    fix = f"point {option} at a regular {what} file"
    too_large = WorkloadError(
        f"{what} file {path} is larger than {limit // MIB} MiB, the most tunelab loads "
        "(it reads the whole file into memory)",
        fix=f"point {option} at a smaller file (a sample is enough: only the prompts a run "
        "sends are used)",
    )
    try:
        if _reported_size(path) > limit:  # a regular file says its size: refuse before reading
            raise too_large
        return read_text(path, max_bytes=limit, what=what)
    except WorkloadError:
        raise
    except FileNotFoundError:
        raise WorkloadError(f"{what} file {path} does not exist", fix=fix) from None
    except NotAFileError as exc:
        raise WorkloadError(f"{exc.message}; tunelab reads only regular files", fix=fix) from None
    except InputTooLargeError:  # it said less than it holds (/proc), or grew while read
        raise too_large from None
    except UnicodeDecodeError:
        raise WorkloadError(f"{what} file {path} is not UTF-8 text", fix=fix) from None
    except (OSError, ValueError) as exc:  # permissions, a NUL in the name, a socket
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise WorkloadError(f"cannot read {what} file {path}: {reason}", fix=fix) from None


def _reported_size(path: Path) -> int:
    """``st_size`` of a regular file, else 0 (the bounded read then decides)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


_PARSED: dict[str, tuple[tuple[int, ...], Any]] = {}


def cached_parse(path: Path, kind: str, parse: Callable[[], _T]) -> _T:
    """``parse()``, kept for this version of ``path`` (one file per ``kind``).

    A study checks its dataset before the first engine starts and then builds
    prompts for every trial; a ShareGPT dump takes seconds to parse, so the
    result is kept while the file's identity (device, inode, size, mtime) stays
    the same. Files that report size 0 (``/proc``) are never kept.
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return parse()  # it raises the right error for a missing or bad path
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    held = _PARSED.get(kind)
    if held is not None and held[0] == key and st.st_size > 0:
        return held[1]  # type: ignore[no-any-return]
    value = parse()
    _PARSED[kind] = (key, value)
    return value
