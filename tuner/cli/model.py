"""``tunelab model``: a study's performance model, its score, and a prediction before a launch.

Without options it calibrates :mod:`tuner.perfmodel` on the study's trials and prints the
step costs and every trial predicted from the others beside what was measured (the median
error and how many figures fell inside the stated 80 % interval). With ``--max-num-seqs``,
``--max-num-batched-tokens`` or workload options it predicts that point instead. The
numbers come from the core (:func:`tuner.perfmodel.study.study_model`); this module prints.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli import options as opt

if TYPE_CHECKING:  # numpy behind them loads only when the command runs
    from tuner.perfmodel.fit import Prediction
    from tuner.perfmodel.study import StudyModel


def register(app: typer.Typer) -> None:
    """Adds ``model`` to the tunelab CLI."""
    app.command("model")(model_command)


def model_command(
    study: opt.StudyOpt = "default",
    max_num_seqs: Annotated[
        int | None, typer.Option("--max-num-seqs", help="Predict at this max-num-seqs.")
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option("--max-num-batched-tokens", help="Predict at this max-num-batched-tokens."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Predict at this concurrency.")
    ] = None,
    input_len: Annotated[int | None, typer.Option("--input-len", help="Prompt tokens.")] = None,
    output_len: Annotated[
        int | None, typer.Option("--output-len", help="Generated tokens.")
    ] = None,
    num_prompts: Annotated[
        int | None, typer.Option("--num-prompts", help="Measured requests.")
    ] = None,
    store_path: opt.StoreOpt = None,
    as_json: opt.JsonOpt = False,
) -> None:
    """A study's performance model: its accuracy on the study's trials, or a prediction."""
    from tuner.perfmodel.forecast import record_of
    from tuner.perfmodel.study import study_model

    store = opt.open_store("model", store_path)
    try:
        trials = store.list(study=study)
    finally:
        store.close()
    found = study_model(trials)
    stored = record_of(trials)
    changes = {
        k: v
        for k, v in {
            "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens,
            "concurrency": concurrency,
            "input_len": input_len,
            "output_len": output_len,
            "num_prompts": num_prompts,
        }.items()
        if v is not None
    }
    if found.model is None:
        raise opt.usage_error("model", f"study {study!r}: no model — {found.reason}")
    if changes:
        try:
            pred = found.predict(changes)
        except ValueError as exc:
            raise opt.usage_error("model", str(exc)) from None
        _print_prediction(pred, found, as_json)
        return
    _print_accuracy(found, study, stored, as_json)


def _prediction_dict(pred: Prediction) -> dict[str, Any]:
    return {
        "point": pred.point.__dict__,
        "output_throughput": pred.output_throughput,
        "output_throughput_80": pred.throughput_interval(),
        "itl_ms": pred.itl_ms,
        "itl_ms_80": pred.itl_interval(),
    }


def _print_prediction(pred: Prediction, found: StudyModel, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(_prediction_dict(pred), indent=1))
        return
    lo, hi = pred.throughput_interval()
    ilo, ihi = pred.itl_interval()
    typer.echo(f"{pred.point.label()}")
    typer.echo(f"  output throughput ~{pred.output_throughput:,.0f} tok/s "
               f"(80 %: {lo:,.0f}–{hi:,.0f})")  # fmt: skip
    typer.echo(f"  engine ITL ~{pred.itl_ms:.2f} ms (80 %: {ilo:.2f}–{ihi:.2f})")
    typer.echo(f"  from {len(found.observations)} trial(s) of this study; other knobs are the "
               "latest trial's: a change the model does not know is unknown until run")  # fmt: skip


def _stored_line(stored: dict[str, Any]) -> str:
    """The record of the forecasts stored before each run (tuner.perfmodel.forecast)."""
    from tuner.perfmodel.forecast import record_text

    return record_text(stored)


def _print_accuracy(found: StudyModel, study: str, stored: dict[str, Any], as_json: bool) -> None:
    model, held = found.model, found.held_out
    assert model is not None
    if as_json:
        out: dict[str, Any] = {
            "study": study,
            "costs": {"a_s": model.a, "b_s": model.b, "c_s": model.c},
            "trials": model.trials,
            "bands": {"throughput": model.throughput_band, "itl": model.itl_band},
            "unusable": found.unusable,
            "other_context": found.other_context,
            "stored_forecasts": stored,
        }
        if held is not None:
            out["held_out"] = {
                "median_abs_throughput_error": held.median_abs_throughput_error,
                "median_abs_itl_error": held.median_abs_itl_error,
                "coverage": held.coverage,
                "rows": [
                    {
                        "trial": o.source,
                        **_prediction_dict(p),
                        "measured_output_throughput": o.output_throughput,
                        "measured_itl_ms": o.itl_ms,
                    }
                    for o, p in held.rows
                ],
            }
        typer.echo(json.dumps(out, indent=1))
        return
    console = Console()
    console.print(
        f"study {study!r}: step {model.a * 1e3:.3f} ms + {model.b * 1e6:.1f} µs per running "
        f"request + {model.c * 1e6:.2f} µs per prefilled token, from {model.trials} trials "
        f"({found.unusable} unusable, {found.other_context} of another config left out)",
        markup=False,
    )
    console.print(_stored_line(stored), markup=False)
    if held is None:
        console.print("too few trials to predict one from the others", markup=False)
        return
    table = Table("trial", "point", "tok/s", "predicted", "ITL ms", "predicted")
    for (obs, pred), et, ei in zip(held.rows, held.throughput_errors, held.itl_errors,
                                   strict=True):  # fmt: skip
        table.add_row(obs.source[:8], obs.point.label(), f"{obs.output_throughput:,.0f}",
                      f"{pred.output_throughput:,.0f} ({et:+.0%})", f"{obs.itl_ms:.2f}",
                      f"{pred.itl_ms:.2f} ({ei:+.0%})")  # fmt: skip
    console.print(table)
    console.print(
        f"each trial predicted from the others: median |error| throughput "
        f"{held.median_abs_throughput_error:.1%}, ITL {held.median_abs_itl_error:.1%}; "
        f"{held.coverage:.0%} of measured figures inside the stated 80 % interval",
        markup=False,
    )
