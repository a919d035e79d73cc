"""What the service accepts from a client: every field checked for type, size and content.

The service's handlers take their input only through these functions. Each
refusal is a :class:`BadRequest` whose message says which field is wrong and
how; the server answers it as a 4xx ``{"error": ...}``. The limits are far
above what a real submission holds (an environment is a few KiB, a tunelab
command line rarely 100 arguments) and far below what could hurt the
service: Linux itself refuses to start a program whose argv and environment
pass ``ARG_MAX`` (usually 2 MiB), or one string over 128 KiB
(``MAX_ARG_STRLEN``), so nothing larger could run as a job anyway.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner import bounded
from tuner.errors import TunelabError
from tuner.service.jobs import safe_title

MAX_BODY = 4 * bounded.MIB
MAX_ITEMS = 8192  # argv items, environment entries
MAX_STRING = 128 * 1024  # one argv item or environment value (Linux MAX_ARG_STRLEN)
MAX_PATH = 4096  # cwd (Linux PATH_MAX)
MAX_TITLE = 4096
MAX_META = 32
MAX_META_KEY = 64
MAX_META_VALUE = 4096
MAX_OFFSET = 1 << 62
_OFFSET = re.compile(r"[0-9]{1,19}")


class BadRequest(TunelabError):
    """A request the service will not act on: the message and the HTTP status to answer.

    Args:
        message: What is wrong, for the client to show.
        status: 400 unless the request is too large (413) or names no job (404).
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Submission:
    """A checked ``POST /jobs`` body."""

    argv: list[str]
    title: str
    cwd: str
    env: dict[str, str]
    meta: dict[str, str]


def parse_submission(body: bytes) -> Submission:
    """The job a ``POST /jobs`` body asks for.

    Raises:
        BadRequest: not UTF-8 JSON, nested too deeply, not an object, or a field of
            the wrong type, size or content (the message names it).
    """
    data = _json_object(body)
    argv = _strings(data.get("argv"), "argv")
    if not argv:
        raise BadRequest("argv must be a non-empty list of strings")
    env = _environment(data.get("env"))
    cwd = _cwd(data.get("cwd"))
    title = data.get("title")
    if title is not None and not (isinstance(title, str) and len(title) <= MAX_TITLE):
        raise BadRequest(f"title must be a string of at most {MAX_TITLE} characters")
    meta = _meta(data.get("meta"))
    return Submission(argv, safe_title(title, argv), cwd, env, meta)


def parse_offset(raw: str | None) -> int:
    """A byte offset from a query string: a whole number from 0 to 2**62; 0 when absent."""
    if raw is None or raw == "":
        return 0
    if not _OFFSET.fullmatch(raw) or int(raw) > MAX_OFFSET:
        raise BadRequest(f"offset must be a whole number of bytes from 0 to {MAX_OFFSET}")
    return int(raw)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = bounded.loads(body.decode("utf-8"), what="request body")
    except UnicodeDecodeError:
        raise BadRequest("the request body is not UTF-8 text") from None
    except bounded.InputTooLargeError as exc:
        raise BadRequest(exc.message) from None
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not JSON ({exc.msg} at byte {exc.pos})") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise BadRequest(f"the request body is not usable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest(f"the request body must be a JSON object, not {_kind(data)}")
    return data


def _strings(value: object, what: str) -> list[str]:
    """A list of strings a program may be started with (no NUL, encodable, bounded)."""
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise BadRequest(f"{what} must be a list of at most {MAX_ITEMS} strings")
    for i, item in enumerate(value):
        _exec_string(item, f"{what}[{i}]", MAX_STRING)
    return value


def _environment(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_ITEMS:
        raise BadRequest(f"env must be an object of at most {MAX_ITEMS} string values")
    for key, item in value.items():
        name = f"env[{key[:40]!r}]"
        _exec_string(key, f"the name of {name}", MAX_STRING)
        if not key or "=" in key:
            raise BadRequest(f"{name} is not a variable name (empty, or holds '=')")
        _exec_string(item, name, MAX_STRING)
    return value


def _cwd(value: object) -> str:
    if value is None:
        return os.getcwd()
    _exec_string(value, "cwd", MAX_PATH)
    assert isinstance(value, str)
    if not os.path.isabs(value) or not Path(value).is_dir():
        raise BadRequest(f"cwd {value[:200]!r} is not an absolute path of a directory")
    return value


def _meta(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_META:
        raise BadRequest(f"meta must be an object of at most {MAX_META} strings")
    for key, item in value.items():
        if len(key) > MAX_META_KEY or not _utf8(key):
            raise BadRequest(f"meta key {key[:40]!r} is longer than {MAX_META_KEY} or not text")
        if not isinstance(item, str) or len(item) > MAX_META_VALUE or not _utf8(item):
            raise BadRequest(f"meta[{key!r}] must be text of at most {MAX_META_VALUE} characters")
    return value


def _exec_string(value: object, what: str, limit: int) -> None:
    """A string the kernel can take as an argument, variable or path: no NUL, encodable."""
    if not isinstance(value, str):
        raise BadRequest(f"{what} must be a string, not {_kind(value)}")
    if len(value) > limit:
        raise BadRequest(f"{what} is longer than {limit} characters")
    if "\0" in value:
        raise BadRequest(f"{what} holds a NUL character")
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        raise BadRequest(f"{what} holds characters that cannot be encoded") from None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value: object) -> str:
    """``a list``, ``null``, ``a number``: the JSON name of what came instead."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return names.get(type(value), "a list" if isinstance(value, list) else "an object")
