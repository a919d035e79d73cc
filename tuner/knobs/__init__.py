"""The knob catalogue's public API: look up, parse, and ask where a knob exists.

Everything outside this package reads knobs through these functions, so the
table itself (``tuner.knobs.catalogue``) can grow or be split without touching
the callers. Version and platform questions are answered from the catalogue's
own data here; the installed vLLM's introspection (``tuner.introspect``) is the
stronger source where it is available and is compared against this view by
``tuner.introspect.compare_with_catalogue``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tuner.bounded import loads as json_loads
from tuner.config import ConfigError, parse_value, split_assignment
from tuner.knobs.catalogue import GROUP_ORDER, GROUP_TITLES, KNOBS
from tuner.knobs.types import Knob, KnobKind, Platform, ValueType
from tuner.knobs.value_sets import VALUE_SETS, lookup, values_for
from tuner.knobs.versions import in_range, parse_version
from tuner.switches import switch_state

__all__ = [
    "GROUP_ORDER",
    "GROUP_TITLES",
    "KNOBS",
    "VALUE_SETS",
    "Availability",
    "AvailabilityStatus",
    "Knob",
    "KnobKind",
    "Platform",
    "ValueType",
    "available",
    "choices_for",
    "coerce",
    "get",
    "groups",
    "keys",
    "parse_assignments",
    "parse_version",
    "value_available",
    "values_for",
]

_BY_KEY: dict[str, Knob] = {knob.key: knob for knob in KNOBS}


class AvailabilityStatus(StrEnum):
    """Whether a knob can be used on a target (vLLM version + platform)."""

    AVAILABLE = "available"
    REMOVED = "removed"  # the target vLLM is at or past the knob's `until`
    NOT_YET = "not-yet"  # the target vLLM is older than the knob's `since`
    NOT_APPLICABLE = "not-applicable"  # the knob has no effect on the target platform


@dataclass(frozen=True)
class Availability:
    """The answer of :func:`available`, with a sentence a user understands.

    Attributes:
        status: The verdict.
        reason: Why, in one sentence (empty when simply available).
        replacement: What to use instead when removed (None if nothing replaces it).
        note: A caveat while available, e.g. that the target vLLM no longer acts on it.
    """

    status: AvailabilityStatus
    reason: str = ""
    replacement: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """True when the knob can be set on the target with an effect."""
        return self.status is AvailabilityStatus.AVAILABLE

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for ``--json`` outputs)."""
        return {
            "status": str(self.status),
            "reason": self.reason,
            "replacement": self.replacement,
            "note": self.note,
        }


def get(key: str) -> Knob | None:
    """The knob with catalogue key ``key`` (a leading ``--`` is ignored), or None."""
    return _BY_KEY.get(_normalise_key(key))


def keys() -> tuple[str, ...]:
    """All catalogue keys, in catalogue order."""
    return tuple(_BY_KEY)


def groups() -> dict[str, tuple[Knob, ...]]:
    """Knobs by TUI group, groups in :data:`GROUP_ORDER` order, knobs in catalogue order."""
    out: dict[str, list[Knob]] = {name: [] for name in GROUP_ORDER}
    for knob in KNOBS:
        out.setdefault(knob.group, []).append(knob)
    return {name: tuple(items) for name, items in out.items() if items}


def group_order(version: str | None, platform: str | None) -> list[str]:
    """The groups as a target's user wants them: any knob that applies first, n/a groups last.

    On the CPU engine the AITER group is all ⊘: listed first (catalogue order), it
    filled the knob panel at 80×24 with rows that do nothing (issue 32). Groups keep
    their catalogue order within each half.
    """
    grouped = groups()
    live = [
        g for g, items in grouped.items() if any(available(k, version, platform).ok for k in items)
    ]
    return live + [g for g in grouped if g not in live]


def applicable_first(
    knobs: Iterable[Knob], version: str | None, platform: str | None
) -> list[Knob]:
    """``knobs`` with those that apply to the target first, each half in the order given."""
    listed = list(knobs)
    ok = [k for k in listed if available(k, version, platform).ok]
    return ok + [k for k in listed if k not in ok]


def available(knob: Knob, version: str | None, platform: str | None) -> Availability:
    """Whether ``knob`` exists in vLLM ``version`` and has an effect on ``platform``.

    An unknown version or platform (None) does not count against the knob: the
    catalogue cannot say more, so the knob is offered. Version comparison uses
    the release numbers only (``0.12.0rc1.dev5+g1234`` counts as 0.12.0),
    because development builds of a release usually already hold its changes.

    Args:
        knob: The catalogue entry.
        version: Target vLLM version, e.g. ``"0.12.0"``; None if unknown.
        platform: ``"rocm"``, ``"cuda"`` or ``"cpu"``; None if unknown.

    Returns:
        The verdict; a removal wins over a platform mismatch because it is
        the stronger reason not to export the knob.

    Raises:
        ValueError: when ``version`` is not a version string (validate user
            input with :func:`parse_version` first).
    """
    note = ""
    if version:
        absent = knob.extra.get("absent_in", ())
        if parse_version(version)[:2] in {parse_version(v)[:2] for v in absent}:
            return Availability(
                AvailabilityStatus.REMOVED,
                f"{knob.key} is not read by vLLM {version} (absent from its envs.py)",
                knob.replacement,
            )
        where = in_range(version, knob.since, knob.until)
        if where > 0:
            repl = f"; use {knob.replacement} instead" if knob.replacement else ""
            return Availability(
                AvailabilityStatus.REMOVED,
                f"{knob.key} was removed in vLLM {knob.until} (target is {version}){repl}",
                knob.replacement,
            )
        if where < 0:
            return Availability(
                AvailabilityStatus.NOT_YET,
                f"{knob.key} first appeared in vLLM {knob.since} (target is {version})",
            )
        no_effect = knob.extra.get("no_effect_since")
        if no_effect and in_range(version, no_effect, None) == 0:
            instead = knob.extra.get("use_instead")
            note = f"vLLM {no_effect} and later no longer act on {knob.key}" + (
                f"; use {instead}" if instead else ""
            )
    if platform:
        plat = platform.lower()
        names = {str(p) for p in knob.platforms}
        if "any" not in names and plat not in names:
            where_ok = ", ".join(sorted(names))
            return Availability(
                AvailabilityStatus.NOT_APPLICABLE,
                f"{knob.key} only has an effect on {where_ok}, not on {plat}",
            )
    return Availability(AvailabilityStatus.AVAILABLE, note=note)


def value_available(knob: Knob, value: object, version: str | None) -> Availability:
    """Whether vLLM ``version`` accepts ``value`` for a CHOICE knob.

    Values the catalogue never saw count as available: the installed vLLM's
    introspection, not this table, is the authority on new names.
    """
    name = knob.extra.get("value_set")
    text = str(value)
    if name and version:
        entry = lookup(name, text)
        if entry is not None and not entry.present_in(version):
            if entry.until and in_range(version, entry.until, None) == 0:
                return Availability(
                    AvailabilityStatus.REMOVED,
                    f"{knob.key}={text} was removed in vLLM {entry.until} (target is {version})",
                )
            return Availability(
                AvailabilityStatus.NOT_YET,
                f"{knob.key}={text} first appeared in vLLM {entry.since} (target is {version})",
            )
    since = knob.extra.get("choice_since", {}).get(text)
    if since and version and in_range(version, since, None) < 0:
        return Availability(
            AvailabilityStatus.NOT_YET,
            f"{knob.key}={text} first appeared in vLLM {since} (target is {version})",
        )
    return Availability(AvailabilityStatus.AVAILABLE)


def choices_for(knob: Knob, version: str | None = None) -> tuple[str, ...]:
    """The values a CHOICE knob accepts in ``version`` (all versions' union if None).

    Knobs whose values vary by vLLM version (attention backends, quantization
    methods, KV-cache dtypes, cudagraph modes) read them from
    :mod:`tuner.knobs.value_sets`; the rest use ``knob.choices``.
    """
    name = knob.extra.get("value_set")
    if name:
        return values_for(name, version)
    return knob.choices


def coerce(key: str, text: str, *, allowed: Iterable[str] | None = None) -> Any:
    """Parses the text of ``--set KEY=VALUE`` into the knob's typed value.

    Args:
        key: Catalogue key (env var name or flag without dashes).
        text: The value as typed.
        allowed: The values the installed vLLM accepts for a CHOICE knob, from
            introspection; it replaces the catalogue's list when given.

    Returns:
        bool for BOOL, int for INT, float for FLOAT, dict/list for JSON, str otherwise.

    Raises:
        ConfigError: for an unknown key (with close matches) or a value that
            does not fit the knob (with the allowed values or range).
    """
    knob = get(key)
    if knob is None:
        close = difflib.get_close_matches(_normalise_key(key), list(_BY_KEY), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown knob {key!r}{hint} (`tunelab knobs` lists them all)")
    raw = text.strip()
    if knob.type is ValueType.BOOL:
        state = switch_state(raw)
        if state is not None:
            return state
        raise ConfigError(f"{knob.key} is a switch: write 1/0 (or true/false), not {text!r}")
    if knob.type is ValueType.INT:
        try:
            value: Any = int(raw)
        except ValueError:
            raise ConfigError(
                f"{knob.key} takes a whole number{_range(knob)}, not {text!r}"
            ) from None
        _check_range(knob, value)
        return value
    if knob.type is ValueType.FLOAT:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{knob.key} takes a number{_range(knob)}, not {text!r}") from None
        _check_range(knob, value)
        return value
    if knob.type is ValueType.JSON:
        try:
            return json_loads(raw, what=knob.key)
        except ValueError as exc:
            raise ConfigError(
                f"{knob.key} takes a JSON value, for example {knob.extra.get('example', '{...}')}; "
                f"{text[:80]!r} is not valid JSON ({getattr(exc, 'msg', exc)})"
            ) from None
    if knob.type is ValueType.CHOICE:
        options = tuple(allowed) if allowed is not None else choices_for(knob)
        if options and raw not in options:
            folded = {o.lower(): o for o in options}
            if raw.lower() in folded:
                return folded[raw.lower()]
            raise ConfigError(
                f"{knob.key} does not accept {text!r}; allowed values: {', '.join(options)}"
            )
        return raw
    if not raw and knob.type is ValueType.STR:
        raise ConfigError(f"{knob.key} needs a value: write {knob.key}=VALUE")
    return raw


def parse_assignments(
    items: list[str], *, allowed: dict[str, Iterable[str]] | None = None, strict: bool = True
) -> dict[str, Any]:
    """Parses repeated ``--set KEY=VALUE`` items into ``{key: typed value}``.

    Args:
        items: The raw ``KEY=VALUE`` strings.
        allowed: Optional introspected value lists per knob key (see :func:`coerce`).
        strict: Reject keys the catalogue does not know (with close matches).
            With False they pass through ``tuner.config.parse_value``, for vLLM
            flags tunelab does not tune (``trust-remote-code=true``).

    Raises:
        ConfigError: on the first malformed item, unknown key or bad value; or
            when the same key is given twice with different values.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, text = split_assignment(item)
        knob = get(key)
        name = knob.key if knob else key
        if knob is None and not strict:
            value = parse_value(text)
        else:
            value = coerce(key, text, allowed=(allowed or {}).get(name))
        if name in out and out[name] != value:
            raise ConfigError(
                f"{name} is set twice ({out[name]!r} and {value!r}); keep one --set {name}=..."
            )
        out[name] = value
    return out


def _normalise_key(key: str) -> str:
    """Env var names keep their case; engine keys accept vLLM's python names (max_num_seqs)."""
    key = key.strip()
    if key.startswith("--"):
        key = key[2:]
    if key != key.upper():
        key = key.replace("_", "-")
    return key


def _range(knob: Knob) -> str:
    if knob.minimum is not None and knob.maximum is not None:
        return f" from {_num(knob.minimum)} to {_num(knob.maximum)}"
    if knob.minimum is not None:
        return f" of at least {_num(knob.minimum)}"
    if knob.maximum is not None:
        return f" of at most {_num(knob.maximum)}"
    return ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _check_range(knob: Knob, value: float) -> None:
    low_ok = knob.minimum is None or value >= knob.minimum
    high_ok = knob.maximum is None or value <= knob.maximum
    if not (low_ok and high_ok):
        raise ConfigError(
            f"{knob.key}={_num(value)} is out of range: it takes a value{_range(knob)}"
        )
