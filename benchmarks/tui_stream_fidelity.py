"""How faithfully a trial started from the TUI measures streaming, with the UI busy beside it.

The TUI runs its trials in its own process. Until the benchmark client got an
event loop of its own (``tuner.bench.own_loop``), it read the engine's stream
on the UI's loop, so every long UI frame delayed its reads: chunks were read
together, median ITL read 0 and whole responses arrived "in one piece". This
script drives the real app with Textual's pilot, as the TUI tests do — one
run, then an A/B of ``max-num-seqs`` 64 against 1 (3 + 3 launches) — against
the ENGINE DOUBLE, which sends one token every ``--token-ms`` (10 ms) per
stream, and prints per trial the median ITL and TPOT the client measured next
to that programmed gap, plus the UI loop's worst stall.

A faithful client reads median ITL ≈ token gap on every trial. Compare two
checkouts side by side in one session with ``--repo``:

    .venv/bin/python benchmarks/tui_stream_fidelity.py [--rounds 2] [--repo PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


async def one_round(token_ms: float) -> tuple[list[dict[str, float]], float]:
    """One run and one A/B in the app; returns each trial's figures and the loop's worst stall."""
    from textual.widgets import Input

    from tests.support.tui_harness import services, settle, wait_for
    from tui.app import TunelabApp
    from tui.messages import JobFinished
    from tui.widgets.knob_panel import KnobPanel
    from tuner.trials.store import TrialStore

    os.environ["DOUBLE_TOKEN_MS"] = str(token_ms)
    seen: list[object] = []
    stalls: list[float] = []

    async def watch_loop() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            stalls.append(now - last)
            last = now

    def finished() -> int:
        return sum(isinstance(m, JobFinished) for m in seen)

    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        watcher = asyncio.ensure_future(watch_loop())
        await settle(pilot)
        names = {"input_len": "32", "output_len": "24", "num_prompts": "16", "concurrency": "8"}
        for name, value in names.items():
            app.screen.query_one(f"#wl-{name}", Input).value = value
        await pilot.pause()
        for key, kind, label in ((None, "r", "the run"), ("1", "a", "the A/B")):
            before = finished()
            if key is not None:
                row = app.main.query_one(KnobPanel).row("max-num-seqs")
                row.control.value = key  # type: ignore[union-attr]
                await pilot.pause()
                row.control.focus()
                await pilot.press("escape")
                app.main.query_one(KnobPanel).row("enable-prefix-caching").control.focus()
            await pilot.press(kind)
            await wait_for(pilot, lambda b=before: finished() > b, 300, label)
        watcher.cancel()
    out = []
    for trial in TrialStore().list():
        results = trial.results or {}
        block = results.get("tunelab") or {}
        out.append(
            {
                "max_num_seqs": float(trial.config.engine.get("max-num-seqs", 0)),
                "median_itl_ms": float(results.get("median_itl_ms") or 0.0),
                "median_tpot_ms": float(results.get("median_tpot_ms") or 0.0),
                "one_chunk": float(block.get("one_chunk_fraction") or 0.0),
            }
        )
    return out, max(stalls, default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--token-ms", type=float, default=10.0)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose code runs")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    os.chdir(args.repo)
    trials: list[dict[str, float]] = []
    worst: list[float] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="tunelab-fidelity-") as home:
            os.environ["TUNELAB_HOME"] = home
            got, stall = asyncio.run(one_round(args.token_ms))
        trials += got
        worst.append(stall)
    print(f"code: {args.repo}  token gap {args.token_ms:g} ms  rounds {args.rounds}")
    print(f"{'max-num-seqs':>12} {'median ITL ms':>14} {'median TPOT ms':>15} {'one piece':>10}")
    for t in trials:
        print(
            f"{t['max_num_seqs']:>12.0f} {t['median_itl_ms']:>14.2f} "
            f"{t['median_tpot_ms']:>15.2f} {t['one_chunk']:>10.0%}"
        )
    faithful = sum(abs(t["median_itl_ms"] - args.token_ms) <= 0.2 * args.token_ms for t in trials)
    print(
        f"faithful trials (median ITL within 20 % of the gap): {faithful}/{len(trials)}; "
        f"median of median ITL {statistics.median(t['median_itl_ms'] for t in trials):.2f} ms; "
        f"UI loop's worst stall per round: {', '.join(f'{s * 1000:.0f} ms' for s in worst)}"
    )


if __name__ == "__main__":
    main()
