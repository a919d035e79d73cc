"""The workload options, declared once; the CLI's flags and the TUI's fields derive from it.

:data:`FIELDS` is the one declaration of what a user sets about a workload:
its name on :class:`~tuner.bench.workload.Workload`, the CLI flag, the TUI
label, the help sentence, the kind of text it takes and the CLI default.
``tuner.cli.options`` builds its Typer options from it and the TUI's workload
panel builds its inputs from it (the pattern of harlequin's ``options.py``,
``to_click()``/``to_widgets()``), and both parse the text with
:func:`workload_from_texts`, so the two faces accept exactly the same values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from tuner.bench.workload import (
    MAX_CONCURRENCY,
    MAX_LEN,
    MAX_NUM_PROMPTS,
    MAX_SEED,
    Workload,
    WorkloadError,
    check_count,
    check_rate,
    parse_slo,
)
from tuner.lab.values import ValueTextError, parse_rate, rate_text
from tuner.rules import WorkloadShape


class FieldKind(StrEnum):
    """The kind of text a workload field takes."""

    COUNT = "count"  # a whole number >= the field's minimum
    OPTIONAL_COUNT = "optional-count"  # empty: unbounded
    RATE = "rate"  # requests/s or inf
    SLO = "slo"  # key:ms,key:ms


@dataclass(frozen=True)
class WorkloadField:
    """One workload option as both faces show it.

    Attributes:
        name: The :class:`Workload` attribute.
        flag: The CLI option (``--input-len``).
        label: The TUI's short label (``in``).
        help: One sentence for ``--help`` and the field's tooltip.
        kind: How its text is parsed.
        minimum: The least value a count may take.
        maximum: The most a count may take (tuner.bench.workload's bound for the
            field, so the message names the flag or label the user typed).
        cli_default: The CLI's default (the TUI starts from its session workload).
    """

    name: str
    flag: str
    label: str
    help: str
    kind: FieldKind
    minimum: int = 1
    maximum: int | None = None
    cli_default: int | str | None = None


FIELDS: tuple[WorkloadField, ...] = (
    WorkloadField("input_len", "--input-len", "in", "Prompt tokens per request.",
                  FieldKind.COUNT, maximum=MAX_LEN, cli_default=128),
    WorkloadField("output_len", "--output-len", "out", "Generated tokens per request.",
                  FieldKind.COUNT, maximum=MAX_LEN, cli_default=128),
    WorkloadField("concurrency", "--concurrency", "conc",
                  "Most requests in flight (empty or unset: unbounded).",
                  FieldKind.OPTIONAL_COUNT, maximum=MAX_CONCURRENCY),
    WorkloadField("num_prompts", "--num-prompts", "n", "Measured requests per trial.",
                  FieldKind.COUNT, maximum=MAX_NUM_PROMPTS, cli_default=64),
    WorkloadField("request_rate", "--request-rate", "rate",
                  "Arrivals per second, or inf (infinity) to send all at once.",
                  FieldKind.RATE, cli_default="inf"),
    WorkloadField("slo", "--slo", "slo",
                  "Goodput SLO in ms, e.g. ttft:500,itl:50 (keys ttft, tpot, itl, e2el).",
                  FieldKind.SLO),
)  # fmt: skip
BY_NAME: dict[str, WorkloadField] = {f.name: f for f in FIELDS}
DEFAULT_WARMUP = 2


def _count(field: WorkloadField, name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:  # also a number of more digits than int() reads
        raise WorkloadError(f"{name} must be a whole number, not {text.strip()[:40]!r}") from None
    if value < field.minimum:
        raise WorkloadError(f"{name} must be at least {field.minimum}, not {value}")
    if field.maximum is not None:
        check_count(name, value, field.minimum, field.maximum)
    return value


def parse_field(field: WorkloadField, text: str, name: str | None = None) -> object:
    """The typed value of one field's text.

    Args:
        field: The field.
        text: What was typed.
        name: How errors name the field (the CLI says ``--request-rate``; default: the label).

    Raises:
        WorkloadError: naming the field and what it takes.
    """
    name = name or field.label
    if field.kind is FieldKind.COUNT:
        return _count(field, name, text)
    if field.kind is FieldKind.OPTIONAL_COUNT:
        return _count(field, name, text) if text.strip() else None
    if field.kind is FieldKind.RATE:
        try:
            rate = parse_rate(text)
        except ValueTextError as exc:
            raise WorkloadError(f"{name} {exc}") from None
        check_rate(name, rate)
        return rate
    return parse_slo(text) if text.strip() else {}


def workload_from_texts(
    texts: Mapping[str, str],
    *,
    warmup: int = DEFAULT_WARMUP,
    seed: int = 0,
    by_flag: bool = False,
) -> Workload:
    """The workload from field texts keyed by :attr:`WorkloadField.name` (missing: CLI default).

    Args:
        texts: Field name -> text.
        warmup: Warm-up requests.
        seed: Prompt and arrival seed.
        by_flag: Name fields in errors by their CLI flag instead of their TUI label.

    Raises:
        WorkloadError: the first bad field, named, with what it takes.
    """
    # Given as numbers, not field texts: bounded here so the error names the option.
    check_count("--warmup" if by_flag else "warm-up", warmup, 0, MAX_NUM_PROMPTS)
    check_count("--seed" if by_flag else "seed", seed, -MAX_SEED - 1, MAX_SEED)
    values: dict[str, object] = {}
    for field in FIELDS:
        default = "" if field.cli_default is None else str(field.cli_default)
        name = field.flag if by_flag else field.label
        values[field.name] = parse_field(field, texts.get(field.name, default), name)
    return Workload(warmup_requests=warmup, seed=seed, **values)  # type: ignore[arg-type]


def workload_texts(workload: Workload) -> dict[str, str]:
    """The field texts that :func:`workload_from_texts` reads back as ``workload``."""
    return {
        "input_len": str(workload.input_len),
        "output_len": str(workload.output_len),
        "concurrency": "" if workload.concurrency is None else str(workload.concurrency),
        "num_prompts": str(workload.num_prompts),
        "request_rate": rate_text(workload.request_rate),
        "slo": ",".join(f"{k}:{v:g}" for k, v in workload.slo.items()),
    }


def shape_for_check(
    stored: Mapping[str, object] | None,
    input_len: int | None,
    output_len: int | None,
    concurrency: int | None,
    goal: str | None,
) -> WorkloadShape | None:
    """The workload the rules see in ``check``: typed options over a preset's ``[workload]``.

    None when neither says anything (the workload rules stay silent).
    """
    stored = stored or {}
    shape = WorkloadShape(
        input_len=input_len or _stored_count(stored, "input_len"),
        output_len=output_len or _stored_count(stored, "output_len"),
        concurrency=concurrency or _stored_count(stored, "concurrency"),
        goal=goal or _stored_text(stored, "goal"),
    )
    if shape == WorkloadShape():
        return None
    return shape


def _stored_count(stored: Mapping[str, object], key: str) -> int | None:
    """A preset's count (a whole number, not a bool); anything else says nothing."""
    value = stored.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _stored_text(stored: Mapping[str, object], key: str) -> str | None:
    value = stored.get(key)
    return value if isinstance(value, str) else None


# The command-line options that name a Workload field (``--warmup`` sets warmup_requests).
OPTION_FIELDS: dict[str, str] = {
    "input_len": "input_len",
    "output_len": "output_len",
    "num_prompts": "num_prompts",
    "concurrency": "concurrency",
    "request_rate": "request_rate",
    "warmup": "warmup_requests",
    "seed": "seed",
    "slo": "slo",
}


def over_preset_workload(
    typed: Workload, given: Collection[str], stored: Mapping[str, object] | None
) -> tuple[Workload, str]:
    """The workload a command runs with a preset: its ``[workload]``, with the options the user
    typed (``given``: option names, :data:`OPTION_FIELDS` keys) over it; and a line saying so
    ("" when the preset has no ``[workload]``: then ``typed`` as it is).

    Why: a preset exported from a trial carries what it was measured on (a dataset, sessions,
    a rate); a run of the preset that silently measured the default workload instead would
    compare figures of two different workloads.

    Raises:
        WorkloadError: The ``[workload]`` is not a workload tunelab can run.
    """
    if not stored:
        return typed, ""
    base = Workload.from_dict(dict(stored))
    names = sorted(n for n in given if n in OPTION_FIELDS)
    fields = {OPTION_FIELDS[n]: getattr(typed, OPTION_FIELDS[n]) for n in names}
    merged = dataclasses.replace(base, **fields)
    kind = merged.source_kind.value
    said = f"the preset's [workload] ({kind}, {merged.num_prompts} requests"
    if merged.dataset_path:
        said += f", {merged.dataset_path}"
    said += ")"
    if names:
        said += f", with {', '.join('--' + n.replace('_', '-') for n in names)} as typed"
    return merged, said
