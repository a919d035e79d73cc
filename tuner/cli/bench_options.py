"""The options of ``tunelab bench``, declared once (one ``Annotated`` alias each).

Typer has no option groups; keeping the aliases here keeps ``bench_command``'s
signature one line per option. The workload sizes take their defaults and
help from tuner.lab.workload's declaration, like ``tunelab run``'s, so the two
commands cannot drift apart; the request rate is read by that module's one
rate parser (tuner.lab.values.parse_rate, through
tuner.lab.workload.parse_field).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tuner.lab.workload import BY_NAME


def workload_option(name: str) -> Any:
    """Workload field ``name``'s flag and help from tuner.lab.workload's declaration.

    No Typer minimum (unlike ``tunelab run``'s): tuner.bench.workload.Workload
    checks the value and says what it must be, the message bench has always given.
    """
    field = BY_NAME[name]
    return typer.Option(field.flag, help=field.help)


UrlOpt = Annotated[str, typer.Option("--url", help="Server base URL, e.g. http://127.0.0.1:8000.")]
ModelNameOpt = Annotated[
    str | None, typer.Option("--model", help="Model name; default: the server's first model.")
]
InputLenOpt = Annotated[int, workload_option("input_len")]
OutputLenOpt = Annotated[int, workload_option("output_len")]
NumPromptsOpt = Annotated[int, workload_option("num_prompts")]
ConcurrencyOpt = Annotated[int | None, workload_option("concurrency")]
RequestRateOpt = Annotated[str, workload_option("request_rate")]
BurstinessOpt = Annotated[
    float, typer.Option("--burstiness", help="Gamma shape of arrivals; 1 = Poisson.")
]
RangeRatioOpt = Annotated[
    float, typer.Option("--range-ratio", help="Length spread: n*(1-r)..n*(1+r).")
]
DurationOpt = Annotated[
    float | None, typer.Option("--duration", help="Run for this many seconds instead.")
]
WarmupOpt = Annotated[int, typer.Option("--warmup", help="Uncounted warm-up requests.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Makes prompts and arrivals repeatable.")]
DatasetOpt = Annotated[
    Path | None,
    typer.Option("--dataset", help="Prompts file: ShareGPT JSON, or JSONL (see --dataset-kind)."),
]
DatasetKindOpt = Annotated[
    str,
    typer.Option(
        "--dataset-kind",
        help="sharegpt (default with --dataset), jsonl, trace (JSONL with arrival times; "
        "Mooncake traces with hash_ids keep their prefix reuse), prefix (shared prefixes) or "
        "sessions (multi-turn conversations: --num-prompts conversations of --turns turns, "
        "each turn the whole history with the real answers; random user turns, or with "
        "--dataset a ShareGPT or OpenAI-chat file's).",
    ),
]
TimeScaleOpt = Annotated[
    float,
    typer.Option(
        "--time-scale",
        help="trace kind: multiply the trace's inter-arrival gaps (0.5 = twice as fast).",
    ),
]
TurnsOpt = Annotated[
    int,
    typer.Option(
        "--turns",
        help="sessions kind: turns of each conversation (with --dataset: at most this many "
        "of each recorded conversation; 1 keeps them all).",
    ),
]
ThinkTimeOpt = Annotated[
    float,
    typer.Option(
        "--think-time", help="sessions kind: mean seconds between an answer and the next turn."
    ),
]
MaxContextOpt = Annotated[
    int,
    typer.Option(
        "--max-context",
        help="sessions kind: end a conversation before a turn longer than this (tokens; 0: none).",
    ),
]
PrefixGroupsOpt = Annotated[
    int,
    typer.Option(
        "--prefix-groups",
        help="prefix kind: distinct shared prefixes; sessions: distinct shared system prompts.",
    ),
]
PrefixLenOpt = Annotated[
    int,
    typer.Option(
        "--prefix-len", help="prefix kind: tokens per shared prefix; sessions: per system prompt."
    ),
]
EndpointOpt = Annotated[str, typer.Option("--endpoint", help="completions or chat.")]
TextPromptsOpt = Annotated[
    bool, typer.Option("--text-prompts", help="Send random prompts as text (server tokenises).")
]
SloOpt = Annotated[str | None, workload_option("slo")]
TokenizerOpt = Annotated[
    str | None, typer.Option("--tokenizer", help="tokenizer.json or model dir.")
]
RequestTimeoutOpt = Annotated[
    float, typer.Option("--request-timeout", help="Seconds before a request is cut.")
]
StallTimeoutOpt = Annotated[
    float, typer.Option("--stall-timeout", help="Seconds without data before a cut.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result JSON.")]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", help="Also write the result JSON here.")
]
DetailedOpt = Annotated[
    bool, typer.Option("--detailed", help="Include per-request lists in the JSON.")
]
HeaderOpt = Annotated[
    list[str] | None,
    typer.Option("--header", help="Extra request header 'Name: value' (repeatable)."),
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option("--api-key-env", help="Environment variable holding an API key (sent as Bearer)."),
]
