"""Version arithmetic for the catalogue: one place that says how versions compare.

vLLM ships development builds (``0.12.0rc1.dev5+g1234``) and platform builds
(``0.32.0+cpu``); the catalogue records release boundaries only, so versions
are compared on their release numbers. ``packaging.version`` does the parsing.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def parse_version(text: str) -> tuple[int, ...]:
    """The release numbers of a version string, padded to three parts.

    Raises:
        ValueError: when ``text`` is not a version (the message says what is).
    """
    try:
        release = Version(text.strip()).release
    except InvalidVersion:
        raise ValueError(
            f"{text!r} is not a vLLM version: write it like 0.12.0 or 0.10.2"
        ) from None
    return tuple(release) + (0,) * max(0, 3 - len(release))


def in_range(version: str, since: str | None, until: str | None) -> int:
    """Where ``version`` lies relative to ``[since, until)``.

    Returns:
        -1 if older than ``since``, 1 if at or past ``until``, 0 inside.
    """
    v = parse_version(version)
    if since is not None and v < parse_version(since):
        return -1
    if until is not None and v >= parse_version(until):
        return 1
    return 0
