"""The export dialog (issue 13, B12): formats show their state by shape; Enter exports.

One trial of the study ENGINE DOUBLE gives the dialog something to export;
the files checked are the ones ``tuner.export`` really wrote.
"""

from __future__ import annotations

from pathlib import Path

from textual.message import Message
from textual.widgets import Input

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished
from tui.widgets.checkbox import CHECKED, UNCHECKED, StateCheckbox


def _box(app: TunelabApp, name: str) -> str:
    box = app.screen.query_one(f"#fmt-{name}", StateCheckbox)
    return box.render().plain  # type: ignore[union-attr]


async def test_formats_show_checked_by_shape_and_enter_in_directory_exports(
    tmp_path: Path,
) -> None:
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "8", "num_prompts": "8", "concurrency": "4"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 90, "run")
        await pilot.press("e")
        await pilot.pause(0.3)
        # The trial is chosen when the dialog opens, so Enter at once exports it.
        first = tmp_path / "at-once"
        app.screen.query_one("#export-dir", Input).value = str(first)
        await pilot.press("enter")
        await pilot.pause(0.5)
        assert sorted(p.suffix for p in first.iterdir()) == [".sh", ".toml"]
        # toml and sh are checked by default; yaml and docker are not — visibly so.
        for name in ("toml", "sh"):
            assert _box(app, name).startswith(CHECKED), _box(app, name)
        for name in ("yaml", "docker"):
            assert _box(app, name).startswith(UNCHECKED), _box(app, name)
        app.screen.query_one("#fmt-yaml", StateCheckbox).focus()
        await pilot.press("space")
        await pilot.pause()
        assert _box(app, "yaml").startswith(CHECKED)
        out = tmp_path / "presets"
        field = app.screen.query_one("#export-dir", Input)
        field.value = str(out)
        field.focus()
        await pilot.press("enter")
        await pilot.pause(0.5)
        written = sorted(p.suffix for p in out.iterdir())
        assert written == [".sh", ".toml", ".yaml"], written
        status = str(app.screen.query_one("#export-status").render())
        assert "Wrote:" in status and str(out) in status


async def test_export_dialog_flags_chunk_metrics_of_a_one_piece_trial() -> None:
    from tuner.bench.metrics import delivery_warning
    from tuner.trials.store import TrialStore

    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "8", "num_prompts": "8", "concurrency": "4"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 90, "run")
        trial = app.session.trials[-1]
        status = ""
        with TrialStore() as store:
            stored = store.get(trial.id)
            assert stored.results is not None
            stored.results["tunelab"] = {
                **stored.results.get("tunelab", {}),
                "one_chunk_fraction": 0.9,
            }
            store.save(stored)
            warning = delivery_warning(stored.results, short=True)
        assert warning
        await pilot.press("e")
        await pilot.pause(0.5)
        status = str(app.screen.query_one("#export-status").render())
        assert f"⚠ ITL/TPOT of this trial: {warning}" in status, status
