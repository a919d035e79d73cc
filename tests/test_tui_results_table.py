"""The results table at 80 columns, with hostile knob values and one-piece responses (issue 13).

The table is mounted in a bare app with real ``Trial`` objects; what it shows
is checked against the core (``delivery_warning``, the trial's values).
"""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from tests.support.tui_harness import wait_for
from tui.widgets.results_table import ALL_KEYS, BUSY_HOST, NARROW_KEYS, ONE_PIECE, ResultsTable
from tuner.bench.host_noise import HostNoise, host_note
from tuner.bench.metrics import delivery_warning
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.trials.model import Trial, TrialStatus

RESULTS = {
    "output_throughput": 812.4,
    "p99_ttft_ms": 41.0,
    "p99_itl_ms": 9.1,
    "request_throughput": 3.2,
}


def _trial(engine: dict[str, Any], results: dict[str, Any]) -> Trial:
    return Trial(
        config=EngineConfig(model="m", engine=engine),
        workload=Workload(input_len=16, output_len=8, num_prompts=4, concurrency=2),
        study="t",
        status=TrialStatus.DONE,
        results=results,
    )


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ResultsTable()


def _row_text(table: ResultsTable, row: int) -> list[str]:
    return [str(getattr(c, "plain", c)) for c in table.get_row_at(row)]


async def test_metrics_fit_at_80_columns_values_are_not_markup_and_one_piece_is_marked() -> None:
    base = _trial({"max-num-seqs": 8}, dict(RESULTS))
    hostile = _trial(
        {"max-num-seqs": 2, "served-model-name": "[/]x"},
        {**RESULTS, "p99_itl_ms": 0.0, "tunelab": {"one_chunk_fraction": 0.9}},
    )
    long = _trial(
        {"max-num-seqs": 2, "max-model-len": 4096, "block-size": 32, "seed": 1234567},
        dict(RESULTS),
    )
    assert delivery_warning(hostile.results or {}) is not None  # the core's verdict
    assert delivery_warning(base.results or {}) is None
    app = _Host()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(ResultsTable)
        table.show([base, hostile, long], base.id)
        await wait_for(pilot, lambda: table.row_count == 3, 5, "rows")
        await pilot.pause()
        keys = [c.key.value for c in table.ordered_columns]
        # At 80 columns the whole table fits (issue 32): ITL, req/s and the guard give way
        # to the detail pane, and the knob column comes last.
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= 80, keys
        assert keys == list(NARROW_KEYS) and keys[-1] == "config"
        hostile_row = _row_text(table, 1)
        # The hostile value reaches the table as typed, not eaten as markup ...
        assert hostile_row[keys.index("config")].startswith("max-num-seqs=2")
        assert "served-model-name: default → [/]x" in table.details[hostile.id].plain
        long_config = _row_text(table, 2)[keys.index("config")]
        assert long_config.endswith("…") and long_config.startswith("block-size=32")
        # ... and the one-piece ITL is marked in the detail pane, as the core says.
        assert f"{ONE_PIECE} " in table.details[hostile.id].plain
        assert ONE_PIECE not in table.details[base.id].plain
        # At 160 columns: every column, the ITL cell itself marked, the config whole.
        await pilot.resize_terminal(160, 24)
        await pilot.pause()
        table.show([base, hostile, long], base.id)
        await pilot.pause()
        keys = [c.key.value for c in table.ordered_columns]
        assert keys == list(ALL_KEYS)
        hostile_row, base_row = _row_text(table, 1), _row_text(table, 0)
        assert hostile_row[keys.index("config")] == "max-num-seqs=2 served-model-name=[/]x"
        itl = hostile_row[keys.index("itl")]
        assert itl.startswith(ONE_PIECE) and itl.endswith("0.0"), itl
        assert not base_row[keys.index("itl")].startswith(ONE_PIECE)


async def test_a_trial_measured_on_a_busy_host_is_flagged_as_the_core_says() -> None:
    busy = HostNoise(10.0, 2, foreign_share=0.5, steal_share=0.0, top=(("yes", 10.0),))
    quiet = HostNoise(10.0, 2, foreign_share=0.01, steal_share=0.0)
    noisy = _trial({"max-num-seqs": 2}, {**RESULTS, "tunelab": {"host_noise": busy.to_dict()}})
    calm = _trial({"max-num-seqs": 8}, {**RESULTS, "tunelab": {"host_noise": quiet.to_dict()}})
    assert host_note(noisy.results or {}) is not None and host_note(calm.results or {}) is None
    app = _Host()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(ResultsTable)
        table.show([calm, noisy], calm.id)
        await wait_for(pilot, lambda: table.row_count == 2, 5, "rows")
        keys = [c.key.value for c in table.ordered_columns]
        status = keys.index("status")
        assert _row_text(table, 0)[status] == "done"
        assert _row_text(table, 1)[status] == f"done {BUSY_HOST}"
