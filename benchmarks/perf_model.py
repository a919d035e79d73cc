"""How well does the study performance model predict points it never saw? (issue 31)

Reads the grid ``benchmarks/perf_model_grid.py`` measured on the CPU engine, calibrates
tunelab's step-time model (:mod:`tuner.perfmodel`) on five of its points — the corners of
(max-num-seqs, concurrency), alternating max-num-batched-tokens, and the centre, each with
all its repeats (a launch measures its point as often as the grid did: five launches) — and
predicts every other point of the grid. Prints each prediction beside the measured figure,
the median absolute error of output throughput and of the engine's mean ITL, and how many
measured figures fell inside the stated 80 % interval::

    .venv/bin/python benchmarks/perf_model.py /tmp/perf-grid.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tuner.bench import Workload  # noqa: E402
from tuner.perfmodel import Observation, accuracy, calibrate  # noqa: E402
from tuner.perfmodel.observation import point_of  # noqa: E402

CPU_DEFAULTS = (2048, 128)  # vLLM's CPU batch defaults (tuner.knobs.defaults.batch_defaults)


def observations(rows: list[dict[str, Any]]) -> list[tuple[Observation, int]]:
    out = []
    for i, row in enumerate(rows):
        res, itl = row["results"], (row.get("server") or {}).get("mean_itl_ms")
        if not res.get("output_throughput") or not itl:
            continue
        found = point_of(row["engine"], Workload.from_dict(row["workload"]), CPU_DEFAULTS)
        assert found is not None
        point, context = found
        obs = Observation(point, context, res["output_throughput"], itl, str(i))
        out.append((obs, int(row.get("repeat", 0))))
    return out


def calibration_set(obs: list[tuple[Observation, int]]) -> list[Observation]:
    """Five points — the four (seqs, concurrency) corners and the centre — with every repeat
    of each: a launch measures its point as often as the grid did (five launches)."""
    first = [o for o, _ in obs]
    seqs = sorted({o.point.max_num_seqs for o in first})
    conc = sorted({o.point.concurrency or 0 for o in first})
    mbts = sorted({o.point.max_num_batched_tokens for o in first})
    wanted = [(seqs[0], conc[0], mbts[0]), (seqs[-1], conc[-1], mbts[-1]),
              (seqs[0], conc[-1], mbts[-1]), (seqs[-1], conc[0], mbts[0]),
              (seqs[len(seqs) // 2], conc[len(conc) // 2], mbts[-1])]  # fmt: skip
    return [
        o
        for o in first
        if (o.point.max_num_seqs, o.point.concurrency or 0, o.point.max_num_batched_tokens)
        in wanted
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", type=Path)
    args = ap.parse_args()
    obs = observations(json.loads(args.grid.read_text()))
    calib = calibration_set(obs)
    model = calibrate(calib)
    held = [o for o, _ in obs if o not in calib]
    score = accuracy(model, held)
    print(f"calibrated on {len(calib)} points: a {model.a * 1e3:.3f} ms/step, b "
          f"{model.b * 1e6:.1f} µs/request/step, c {model.c * 1e6:.2f} µs/prefill token; "
          f"80 % bands ±{model.throughput_band:.0%} tok/s, ±{model.itl_band:.0%} ITL")  # fmt: skip
    for o in calib:
        print(f"  calib  {o.point.label():<44} {o.output_throughput:7.0f} tok/s "
              f"{o.itl_ms:6.2f} ms")  # fmt: skip
    for (o, p), et, ei in zip(score.rows, score.throughput_errors, score.itl_errors, strict=True):
        print(f"  held   {o.point.label():<44} {o.output_throughput:7.0f} tok/s (pred "
              f"{p.output_throughput:6.0f}, {et:+6.1%})  {o.itl_ms:6.2f} ms (pred "
              f"{p.itl_ms:6.2f}, {ei:+6.1%})")  # fmt: skip
    print(f"held-out points: {len(held)}; median |error| output throughput "
          f"{score.median_abs_throughput_error:.1%}, engine ITL "
          f"{score.median_abs_itl_error:.1%}; inside the 80 % interval: {score.coverage:.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
