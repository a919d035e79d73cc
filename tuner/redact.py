"""Secrets out of everything tunelab prints, stores or exports: one place for the rules.

Secrets reach tunelab three ways: environment variables (``HF_TOKEN``; see
:mod:`tuner.export.env_policy`), engine arguments that carry a credential
(``--hf-token``, ``--api-key``) and URLs with a password or a token
(``postgresql://user:PASSWORD@host/db``, ``http://host/?api_key=...``). None of
them may be written to a file tunelab writes (preset, launch script, result
JSON, trial store) and each is shown as :data:`REDACTED` when printed. The
engine arguments are those of vLLM 0.32 whose value is a credential
(vllm/engine/arg_utils.py ``--hf-token``; vllm/entrypoints/launchers/cli_args.py
``FrontendArgs.api_key``); vLLM reads both from the environment as well
(``HF_TOKEN``, ``VLLM_API_KEY``), which is where they belong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"

# Engine arguments (flag names without dashes) whose value is a credential,
# with the environment variable vLLM reads instead (the fix we tell users).
SECRET_ENGINE_ARGS: dict[str, str] = {
    "hf-token": "HF_TOKEN",
    "api-key": "VLLM_API_KEY",
}

# Query parameters that carry a credential (matched case-insensitively as a
# whole name or a ``_``/``-`` separated part: api_key, access-token, sig ...).
_SECRET_PARAM_RE = re.compile(
    r"(^|[_-])(token|key|apikey|secret|password|passwd|pwd|auth|authorization|"
    r"signature|sig|credential|credentials|session)([_-]|$)",
    re.IGNORECASE,
)
# scheme://user:password@host inside free text (log lines, error messages).
_URL_USERINFO_RE = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)[^\s/@]*(?=@)")


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
    such as ``token``, ``api_key`` or ``password``. A text that is not a URL
    is returned with any ``scheme://user:pass@`` inside it redacted.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if not parts.scheme or not parts.netloc:
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{user}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_param(k) for k, _ in pairs):
            query = urlencode(
                [(k, REDACTED if is_secret_param(k) else v) for k, v in pairs], safe="*"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Free text with the password of every ``scheme://user:pass@`` in it replaced."""
    return _URL_USERINFO_RE.sub(lambda m: m.group("pre") + REDACTED, text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """An argv with the values of secret engine arguments replaced (for logs and messages).

    Handles both ``--api-key VALUE`` and ``--api-key=VALUE``; URLs anywhere in
    the argv lose their passwords too.
    """
    out: list[str] = []
    hide_next = False
    for item in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if item.startswith("--"):
            key, sep, _value = item[2:].partition("=")
            if is_secret_engine_arg(key):
                if sep:
                    out.append(f"--{key}={REDACTED}")
                else:
                    out.append(item)
                    hide_next = True
                continue
        out.append(redact_text(item))
    return out


def redact_engine_args(engine: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an engine-argument table with secret values replaced."""
    return {k: (REDACTED if is_secret_engine_arg(k) else v) for k, v in engine.items()}
