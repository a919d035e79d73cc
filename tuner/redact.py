"""Secrets out of everything tunelab prints, stores or exports: one place for the rules.

Secrets reach tunelab four ways: environment variables (``HF_TOKEN``; see
:mod:`tuner.export.env_policy`), engine arguments that carry a credential
(``--hf-token``, ``--api-key``), request headers (``tunelab bench --header
'Authorization: Bearer ...'``) and URLs with a password or a token
(``postgresql://user:PASSWORD@host/db``, ``http://host/?api_key=...``). None of
them may be written to a file tunelab writes (preset, launch script, result
JSON, trial store, crash report) and each is shown as :data:`REDACTED` when
printed. The engine arguments are those of vLLM 0.32 whose value is a
credential (vllm/engine/arg_utils.py ``--hf-token``;
vllm/entrypoints/launchers/cli_args.py ``FrontendArgs.api_key``); vLLM reads
both from the environment as well (``HF_TOKEN``, ``VLLM_API_KEY``), which is
where they belong.

Redaction finds the *spans* that hold a secret and replaces them, so every
rule sees the original text and the rules compose (overlapping spans merge).
The rules err on the side of hiding too much: a report with one host name
too few is still useful, one with a password in it is a leak.

- URL userinfo: the password runs from the first ``:`` after the user to the
  LAST ``@`` of the URL, not to the first ``/``, ``?`` or ``#``: SQLAlchemy
  (``sqlalchemy.engine.url._parse_url``: ``password [^@]*``) accepts
  ``postgresql://u:pa/ss?w#rd@host/db`` and connects with that password,
  where :func:`urllib.parse.urlsplit` would cut it at the ``/``.
- Query and fragment parameters whose name looks like a credential
  (``token``, ``api_key``, ``sig``, ``X-Amz-Credential``, ``sslpassword``).
- ``name=value`` pairs with such a name in free text: libpq DSNs
  (``host=h password=secret``, quoted values too), ``HF_TOKEN=...``.
- ``'name': 'value'`` pairs of a printed dict or JSON object.
- Header lines (``Authorization: ...``, ``X-Api-Key: ...``) and ``Bearer`` tokens.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

REDACTED = "***"

# Engine arguments (flag names without dashes) whose value is a credential,
# with the environment variable vLLM reads instead (the fix we tell users).
SECRET_ENGINE_ARGS: dict[str, str] = {
    "hf-token": "HF_TOKEN",
    "api-key": "VLLM_API_KEY",
}

# Flags whose value is an HTTP header "Name: value". Any header may carry a
# credential, so the value is hidden whatever the header's name.
HEADER_FLAGS = frozenset({"--header", "--headers", "-H"})

# Shortest literal that :func:`scrub` removes: shorter strings are too common
# in a traceback (ports, words) to remove blindly.
MIN_SCRUB = 6

# Query parameters and key names that carry a credential (matched
# case-insensitively as a whole name or a ``_``/``-`` separated part: api_key,
# access-token, sig ...; or containing password/secret: sslpassword, client_secret).
_SECRET_PARAM_RE = re.compile(
    r"(^|[_.-])(token|key|apikey|secret|password|passwd|pwd|passphrase|auth|authorization|"
    r"signature|sig|credential|credentials|session|cookie)([_.-]|$)"
    r"|password|passwd|passphrase|secret|apikey|credential|token$",
    re.IGNORECASE,
)
# A key whose value is a credential, outside a URL query (``KEY=VALUE`` items,
# ``name=value`` and ``'name': 'value'`` in free text, header names): the name
# ENDS in a credential word (HF_TOKEN, api_key, AWS_SECRET_ACCESS_KEY) or holds
# password/secret. Stricter than query names, so that ``long-prefill-token-threshold``
# and ``token_ids`` keep their values.
_SECRET_KEY_RE = re.compile(
    r"(^|[_.-])(token|key|apikey|secret|password|passwd|pwd|passphrase|auth|authorization|"
    r"signature|sig|credential|cookie)$|password|passwd|passphrase|secret|apikey",
    re.IGNORECASE,
)
# A flag followed by a separate value that is a secret (``--token X``). Only
# names that END in a credential word: ``--allow-credentials`` is a boolean flag
# and ``--long-prefill-token-threshold`` a number, and the item after them is
# not theirs to hide.
_SECRET_FLAG_RE = re.compile(
    r"(^|[_-])(token|key|apikey|secret|password|passwd|pwd|passphrase)$|password|passwd|passphrase",
    re.IGNORECASE,
)
_LOOSE_NAMES = frozenset({"key", "session", "sig"})
_HEADER_NAMES = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})

_SCHEME_RE = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
_QUERY_RE = re.compile(r"[?&;#]([^=&;#\s?'\"]+)=")
_FREE_KV_RE = re.compile(r"(?<![\w.%?&;#\-])([A-Za-z_][\w.\-]*)[ \t]*=(?!=)[ \t]*")
_DICT_KV_RE = re.compile(r"""(['"])([^'"\s]{1,80})\1[ \t]*:[ \t]*(['"]?)""")
_HEADER_RE = re.compile(r"(?<![\w\-])([A-Za-z][\w\-]*)[ \t]*:[ \t]*(?!//)")
_BEARER_RE = re.compile(r"\b[Bb]earer[ \t]+([^\s'\"]+)")
_LINE_END_RE = re.compile(r"[\r\n]")
_SPACE_RE = re.compile(r"\s")
_AMP_RE = re.compile(r"&")
_QUERY_STOP_RE = re.compile(r"[&'\"\s]")
_HEADER_STOP_RE = re.compile(r"[\r\n'\"]")
_WORD_STOP_RE = re.compile(r"[\s'\",)]")
_JSON_STOP_RE = re.compile(r"[\s,}\]]")
# The end of a quoted value: its closing quote (a backslash escapes one), else the line's end.
_CLOSE_RE = {q: re.compile(rf"[\r\n]|(?<!\\){q}") for q in "'\""}

Span = tuple[int, int]


def is_secret_engine_arg(key: str) -> bool:
    """True when the engine argument ``key`` (no dashes) carries a credential."""
    return key.strip().lstrip("-").replace("_", "-").lower() in SECRET_ENGINE_ARGS


def is_secret_param(name: str) -> bool:
    """True when a URL query parameter name looks like it carries a credential."""
    return bool(_SECRET_PARAM_RE.search(name))


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo and token-like query values replaced.

    The user name is kept (it says which account, and is rarely secret); the
    password becomes :data:`REDACTED`, as do the values of query parameters
    such as ``token``, ``api_key`` or ``password``. The whole string is taken
    as one URL, so a password holding ``/``, ``?``, ``#``, ``@`` or spaces is
    hidden whole. A text that is not a URL is redacted as free text.
    """
    return _replace(url, _spans(url, single=True))


def redact_text(text: str) -> str:
    """Free text (a message, a log line, a traceback) with every secret in it replaced.

    URLs lose their passwords and token-like query values, ``password=`` of a
    libpq DSN and other secret-named ``name=value`` or ``'name': 'value'``
    pairs lose their values, header lines such as ``Authorization:`` and
    ``Bearer`` tokens are hidden.
    """
    return _replace(text, _spans(text, single=False))


def redact_argv(argv: Sequence[str]) -> list[str]:
    """An argv with every secret in it replaced (for logs, titles, messages, crash reports).

    Hides the value of every ``--header`` (``--header V``, ``--header=V``,
    ``-H V``; the header's name is kept, its value hidden whatever the name),
    of secret engine arguments and other credential flags (``--api-key V``,
    ``--hf-token=V``), of secret ``KEY=VALUE`` items (``--set HF_TOKEN=V``),
    and the passwords and secret query values of URLs anywhere in an item
    (``--storage URL``, ``--url=URL``, ``--set endpoint=URL``).
    """
    return [_replace(item, spans) for item, spans in zip(argv, _argv_spans(argv), strict=True)]


def argv_secrets(argv: Sequence[str]) -> set[str]:
    """The secret strings :func:`redact_argv` hides, in the forms a library may echo them.

    Each secret comes raw, percent-decoded and percent-encoded, and split at
    URL delimiters and spaces (a library that misparses a password prints a
    piece of it; ``Bearer TOKEN`` may be echoed as ``TOKEN``). Feed the set
    to :func:`scrub` to remove them from text that quotes them out of context.
    """
    found: set[str] = set()
    for item, spans in zip(argv, _argv_spans(argv), strict=True):
        for start, end in _merged(spans):
            found |= _forms(item[start:end])
    return {s for s in found if len(s) >= MIN_SCRUB}


def environ_secrets(environ: Mapping[str, str]) -> set[str]:
    """Values of secret-named environment variables (``HF_TOKEN``, ``*_API_KEY``...).

    Paths are not secrets (``PWD``, whose name holds ``pwd``; ``*_FILE``,
    ``*_DIR``, ``*_PATH``, ``*_SOCK``; any value naming an existing file):
    scrubbing them would blank every file name of a traceback. Values shorter
    than 8 characters are too likely to be ordinary words.
    """
    out: set[str] = set()
    for name, value in environ.items():
        upper = name.upper()
        if upper in ("PWD", "OLDPWD") or upper.endswith(("FILE", "DIR", "PATH", "SOCK")):
            continue
        if not is_secret_param(name) or len(value) < 8:
            continue
        if os.path.isabs(value) and os.path.exists(value):
            continue
        out.add(value)
    return out


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each literal secret replaced by :data:`REDACTED`."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SCRUB}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redact_engine_args(engine: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an engine-argument table with secret values replaced."""
    return {k: (REDACTED if is_secret_engine_arg(k) else v) for k, v in engine.items()}


# -- spans ------------------------------------------------------------------


class _Scan:
    """One text and memoised searches over it.

    Each rule walks its matches left to right and asks "where is the next
    stop after here" or "where is the last ``@`` before the end of this
    URL". Remembering the last answer makes hostile text (a million ``a://``
    or ``password=`` in a row) cost linear time instead of quadratic.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._next: dict[str, tuple[int, int]] = {}
        self._last: dict[tuple[str, int], tuple[int, int]] = {}

    def next(self, pattern: re.Pattern[str], pos: int) -> int:
        """Start of the first match of ``pattern`` at or after ``pos`` (``len(text)``: none)."""
        hit = self._next.get(pattern.pattern)
        if hit is None or not hit[0] <= pos <= hit[1]:
            m = pattern.search(self.text, pos)
            hit = (pos, m.start() if m else len(self.text))
            self._next[pattern.pattern] = hit
        return hit[1]

    def last(self, char: str, start: int, end: int) -> int:
        """Index of the last ``char`` in ``text[start:end]``, -1 if none."""
        hit = self._last.get((char, end))
        if hit is None or start < hit[0]:
            hit = (start, self.text.rfind(char, start, end))
            self._last[(char, end)] = hit
        return hit[1] if hit[1] >= start else -1


def _spans(text: str, *, single: bool) -> list[Span]:
    """Every span of ``text`` that holds a secret.

    ``single``: ``text`` is one value (an argv item, a configured URL), so a
    URL at its start runs to its end, spaces included.
    """
    scan = _Scan(text)
    head = _SCHEME_RE.match(text) if single else None
    spans = _userinfo_spans(scan)
    if head is not None:
        spans += _password_span(scan, head.end(), len(text))
    spans += _stop_spans(scan, _QUERY_RE, _is_query_secret, _AMP_RE if head else _QUERY_STOP_RE)
    spans += _free_kv_spans(scan)
    spans += _dict_kv_spans(scan)
    spans += _header_spans(scan)
    spans += [(m.start(1), m.end(1)) for m in _BEARER_RE.finditer(text)]
    return spans


def _password_span(scan: _Scan, host: int, end: int) -> list[Span]:
    """The password of the URL whose authority starts at ``host`` and which ends at ``end``.

    It runs from the first ``:`` after the user to the LAST ``@`` before ``end``.
    """
    at = scan.last("@", host, end)
    colon = scan.text.find(":", host, at) if at > 0 else -1
    if colon < 0 or colon + 1 == at:
        return []
    if any(c in "/?#" or c.isspace() for c in scan.text[host:colon]):
        return []  # the ':' is in a path or a query, not in a userinfo
    return [(colon + 1, at)]


def _userinfo_spans(scan: _Scan) -> list[Span]:
    """The passwords of the URLs inside free text.

    A URL ends at white space; one right after a quote ends at the last such
    quote on its line, as a quoted password may hold spaces (SQLAlchemy's
    ``Could not parse SQLAlchemy URL from string '...'``).
    """
    text, spans = scan.text, []
    for m in _SCHEME_RE.finditer(text):
        start = m.start()
        line_end = scan.next(_LINE_END_RE, start)
        quote_char = text[start - 1] if start and text[start - 1] in "'\"" else ""
        if quote_char:
            close = scan.last(quote_char, start, line_end)
            end = close if close > start else line_end
        else:
            end = min(scan.next(_SPACE_RE, start), line_end)
        spans += _password_span(scan, m.end(), end)
    return spans


def _stop_spans(
    scan: _Scan, pattern: re.Pattern[str], secret: Callable[[str], bool], stop: re.Pattern[str]
) -> list[Span]:
    """For each match of ``pattern`` whose group 1 is ``secret``: from its end to a ``stop``.

    A value is searched from the end of the previous one at the earliest, so
    overlapping matches cost nothing more (and can only make a span longer).
    """
    spans: list[Span] = []
    floor = 0
    for m in pattern.finditer(scan.text):
        if secret(m.group(1)):
            end = scan.next(stop, max(m.end(), floor))
            spans.append((m.end(), end))
            floor = max(floor, end)
    return spans


def _free_kv_spans(scan: _Scan) -> list[Span]:
    """Values of ``name=value`` pairs whose name is a credential (libpq DSNs, env dumps).

    A quoted value (libpq's ``password='a b'``) runs to its closing quote, an
    unquoted one to white space.
    """
    text, spans, floor = scan.text, [], 0
    for m in _FREE_KV_RE.finditer(text):
        name = m.group(1)
        if name.lower() in _LOOSE_NAMES or not _is_secret_name(name):
            continue
        value = m.end()
        if value < len(text) and text[value] in "'\"":
            end = scan.next(_CLOSE_RE[text[value]], max(value + 1, floor))
            end += 1 if end < len(text) and text[end] == text[value] else 0
        else:
            end = scan.next(_SPACE_RE, max(value, floor))
        spans.append((value, end))
        floor = max(floor, end)
    return spans


def _dict_kv_spans(scan: _Scan) -> list[Span]:
    """Values of ``'name': 'value'`` pairs (a printed dict, JSON) whose name is a credential.

    A quoted value runs to its closing quote, an unquoted one (a number) to
    the next ``,``, ``}``, ``]`` or white space.
    """
    spans: list[Span] = []
    floor = 0
    for m in _DICT_KV_RE.finditer(scan.text):
        if _is_secret_name(m.group(2)):
            stop = _CLOSE_RE[m.group(3)] if m.group(3) else _JSON_STOP_RE
            end = scan.next(stop, max(m.end(), floor))
            spans.append((m.end(), end))
            floor = max(floor, end)
    return spans


def _header_spans(scan: _Scan) -> list[Span]:
    """Values of header lines (``Authorization: ...``, ``X-Api-Key: ...``, ``password: ...``).

    A header's value (a name with ``-`` or a known header) runs to the line's
    end or a quote; for an identifier (``api_key: ...``, often a Python
    annotation in a traceback's source line) only the next word is hidden.
    """
    return _stop_spans(
        scan, _HEADER_RE, lambda n: _header_kind(n) == "header", _HEADER_STOP_RE
    ) + _stop_spans(scan, _HEADER_RE, lambda n: _header_kind(n) == "word", _WORD_STOP_RE)


def _header_kind(name: str) -> str | None:
    """``"header"`` (value to the line's end), ``"word"`` (one word) or None (not secret)."""
    lower = name.lower()
    if lower in _LOOSE_NAMES or not (lower in _HEADER_NAMES or _is_secret_name(name)):
        return None
    return "header" if lower in _HEADER_NAMES or "-" in name else "word"


def _is_query_secret(name: str) -> bool:
    """A query or fragment parameter (percent-encoded name) that carries a credential."""
    return is_secret_param(unquote(name))


def _merged(spans: Iterable[Span]) -> list[Span]:
    """Non-empty spans, sorted, overlapping or touching ones joined."""
    out: list[Span] = []
    for start, end in sorted(s for s in spans if s[0] < s[1]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def _replace(text: str, spans: Iterable[Span]) -> str:
    """``text`` with each merged span replaced by :data:`REDACTED`."""
    parts: list[str] = []
    pos = 0
    for start, end in _merged(spans):
        parts += [text[pos:start], REDACTED]
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _forms(secret: str) -> set[str]:
    """A secret as a library may echo it: raw, decoded, encoded, and its pieces."""
    forms = {secret, unquote(secret), quote(secret, safe="")}
    for form in list(forms):
        forms.update(re.split(r"[\s/?#@:]+", form))
    return {f for f in forms if f}


# -- argv -------------------------------------------------------------------


def _argv_spans(argv: Sequence[str]) -> list[list[Span]]:
    """For each argv item, the spans to hide (see :func:`redact_argv`)."""
    out: list[list[Span]] = []
    pending: str | None = None  # the role of the next item, set by a flag before it
    for item in argv:
        if pending is not None:
            out.append(_value_spans(item, 0, pending))
            pending = None
            continue
        role, offset = _flag_role(item)
        if offset is None:
            out.append([])
            pending = role
        else:
            out.append(_value_spans(item[offset:], offset, role))
    return out


def _flag_role(item: str) -> tuple[str | None, int | None]:
    """What ``item`` is: (role of its value, where its value starts; None: in the next item).

    Roles: ``"header"`` (a header's value is hidden, its name kept),
    ``"secret"`` (the whole value is hidden), None (searched for URLs and
    secret ``KEY=VALUE``).
    """
    if item.startswith("-H") and not item.startswith("--"):
        return "header", (None if item == "-H" else 2)
    if not item.startswith("--"):
        return None, 0
    flag, sep, _ = item.partition("=")
    name = flag[2:]
    role = None
    if flag in HEADER_FLAGS:
        role = "header"
    elif is_secret_engine_arg(name) or (
        _SECRET_FLAG_RE.search(name) and not name.lower().startswith("no-")
    ):
        role = "secret"
    if sep:
        return role, len(flag) + 1
    return role, None if role else len(item)


def _value_spans(value: str, offset: int, role: str | None) -> list[Span]:
    """The spans to hide in one value (an argv item or the part after ``--flag=``)."""
    if role == "secret":
        spans = [(0, len(value))]
    elif role == "header":
        spans = _header_value_span(value)
    else:
        name, sep, rest = value.partition("=")
        if sep and name and not name.startswith("-") and _is_secret_name(name):
            spans = [(len(name) + 1, len(value))]
        elif sep and _SCHEME_RE.match(rest):
            spans = [(len(name) + 1 + s, len(name) + 1 + e) for s, e in _spans(rest, single=True)]
            spans += _spans(value, single=False)
        else:
            spans = _spans(value, single=True)
    return [(offset + s, offset + e) for s, e in spans]


def _header_value_span(value: str) -> list[Span]:
    """``Name: value`` hides the value; anything else (no well-formed name) is hidden whole."""
    name, sep, rest = value.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        return [(0, len(value))]
    start = len(name) + 1 + (len(rest) - len(rest.lstrip()))
    return [(start, len(value))]


def _is_secret_name(name: str) -> bool:
    """A key whose value is a credential (``hf-token``, ``HF_TOKEN``, ``api_key``, ``password``)."""
    return is_secret_engine_arg(name) or bool(_SECRET_KEY_RE.search(name))
