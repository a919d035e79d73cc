"""The options of ``tunelab ab``, ``sweep``, ``tune`` and ``winner``, declared once.

Typer has no option groups, so each option is an ``Annotated`` alias the
commands in tuner.cli.studies declare as a parameter; keeping them here keeps
each command's signature one line per option (and the commands short). The
options shared with ``tunelab run`` live in tuner.cli.options. The counts'
maxima are tuner.lab.limits' (the job spec and capacity plan use them too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuner.lab.limits import MAX_REPEATS, MAX_TRIALS

# -- shared by the study commands -------------------------------------------------
SloListOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--slo",
        help="Repeatable. METRIC<=VALUE constrains which trials count (e.g. p99_ttft_ms<=500); "
        "KEY:MS sets a goodput SLO of the workload (e.g. ttft:500).",
    ),
]
RepeatsOpt = Annotated[
    int, typer.Option("--repeats", min=1, max=MAX_REPEATS, help="Trials per arm or point.")
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also print engine log lines.")]
ObjectiveKeyOpt = Annotated[
    str,
    typer.Option(
        "--objective", help="Result key to compare/rank by (e.g. output_throughput, p99_ttft_ms)."
    ),
]
GpusOpt = Annotated[
    str | None,
    typer.Option(
        "--gpus",
        help="GPU ids the study may use, e.g. 0,1,2,3 (default: all visible). Trials run side "
        "by side, one engine per GPU slot of TP x PP x DP GPUs.",
    ),
]

# -- ab -----------------------------------------------------------------------------
ASetOpt = Annotated[
    list[str] | None, typer.Option("--a-set", help="KEY=VALUE for arm A (repeatable).")
]
BSetOpt = Annotated[
    list[str] | None, typer.Option("--b-set", help="KEY=VALUE for arm B (repeatable).")
]
APresetOpt = Annotated[str | None, typer.Option("--a-preset", help="Preset TOML for arm A.")]
BPresetOpt = Annotated[
    str | None,
    typer.Option("--b-preset", help="Preset TOML for arm B (default: arm A's, --b-set on top)."),
]
OrderOpt = Annotated[
    str, typer.Option("--order", help="abba (counterbalanced: cancels linear drift) or abab.")
]
MaxRepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-repeats",
        min=2,
        max=MAX_REPEATS,
        help="Sequential A/B: look after every round and stop once the verdict is clear "
        "(error rate kept by alpha spending), at most this many launches per arm.",
    ),
]
EquivalenceOpt = Annotated[
    str | None,
    typer.Option(
        "--equivalence",
        help="Sequential A/B: also stop when no difference bigger than this is left, e.g. 2%.",
    ),
]
ConfidenceOpt = Annotated[float, typer.Option("--confidence", min=0.5, max=0.999)]
MinEffectOpt = Annotated[
    float,
    typer.Option("--min-effect", min=0.0, help="Smallest relative gain that counts (0.02 = 2%)."),
]


def _study_name(kind: str) -> typer.models.OptionInfo:
    """``--study`` of a study command whose default name is ``<kind>-<time>`` (tuner.lab.plans)."""
    option: typer.models.OptionInfo = typer.Option(
        "--study", help=f"Study name (default {kind}-<time>)."
    )
    return option


AbStudyOpt = Annotated[str | None, _study_name("ab")]
CapacityStudyOpt = Annotated[str | None, _study_name("capacity")]
VerifyStudyOpt = Annotated[str | None, _study_name("verify")]
AblateStudyOpt = Annotated[str | None, _study_name("ablate")]
ReportOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--report",
        help="Run nothing: print the report of the --study's last A/B from the store "
        "(the same verdict the TUI shows).",
    ),
]
ProfileOpt = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="Profile each arm's first launch after its measured run (torch profiler, no "
        "extra launch, never during the measured run) and say why B is faster, by kernel "
        "family.",
    ),
]

# -- sweep --------------------------------------------------------------------------
SweepSpecArg = Annotated[
    str, typer.Argument(metavar="KEY=V1,V2,...", help="The knob (or workload field) to sweep.")
]
DescentOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--descent", help="More KEY=V1,V2,... for coordinate descent, in order (repeatable)."
    ),
]
SweepStudyOpt = Annotated[str | None, _study_name("sweep")]

# -- tune ---------------------------------------------------------------------------
TrialsOpt = Annotated[
    int, typer.Option("--trials", min=1, max=MAX_TRIALS, help="Points to measure in this run.")
]
SpaceFileOpt = Annotated[
    Path | None,
    typer.Option("--space", help="Search space file (TOML or JSON: \\[params], slo, \\[fixed])."),
]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--param", help="KEY=V1,V2,... | KEY=int:LO..HI[:log] | KEY=float:LO..HI (repeatable)."
    ),
]
TuneObjectiveOpt = Annotated[
    str,
    typer.Option(
        "--objective",
        help="throughput, latency, pareto (throughput vs latency), or capacity (the most "
        "users meeting --slo 'p99_ttft_ms<=500', one engine launch per point).",
    ),
]
LatencyMetricOpt = Annotated[
    str, typer.Option("--latency-metric", help="Latency key for latency/pareto objectives.")
]
StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        help="Optuna storage URL (default sqlite:///<data dir>/optuna.db; "
        "postgresql://... to share a study between nodes).",
    ),
]
TuneStudyOpt = Annotated[str, typer.Option("--study", help="Study name; re-running resumes it.")]
SamplerSeedOpt = Annotated[int | None, typer.Option("--sampler-seed", help="Seed of the sampler.")]

# -- winner -------------------------------------------------------------------------
WinnerStudyOpt = Annotated[
    str | None, typer.Option("--study", help="Study (default: the most recent one).")
]
WinnerObjectiveOpt = Annotated[
    str | None,
    typer.Option("--objective", help="Result key to rank by (default: the study's)."),
]
WinnerSloOpt = Annotated[
    list[str] | None,
    typer.Option("--slo", help="METRIC<=VALUE (repeatable); default: the SLO the study ran with."),
]
RequireGuardOpt = Annotated[
    str | None,
    typer.Option(
        "--require-guard",
        metavar="same|close",
        help="Only trials whose outputs the drift guard found the same as the study baseline's "
        "(close: or numerically close) may win; a trial the guard did not check is left out too.",
    ),
]

NoPruneOpt = Annotated[
    bool,
    typer.Option(
        "--no-prune",
        help="Measure every point to the end (default: a point whose interim throughput is "
        "clearly below the best, beyond the noise of both, is stopped and kept as pruned).",
    ),
]
NoSkipOpt = Annotated[
    bool,
    typer.Option(
        "--no-skip",
        help="No study model: launch Optuna's points only, every one (default: from 4 "
        "measured trials like a point, one the model is sure misses --slo is stored as "
        "skipped, not launched, and the point it predicts beats every measured one under "
        "the SLO is launched next).",
    ),
]

SpendingOpt = Annotated[
    str,
    typer.Option(
        "--spending",
        help="Sequential A/B: how the error rate is spent over the looks: pocock (default), obf "
        "(O'Brien-Fleming), or front (most at the first look, with pooled t: a 2x gain can stop "
        "at 2 launches per arm, at some power cost on small effects; docs/studies.md).",
    ),
]
