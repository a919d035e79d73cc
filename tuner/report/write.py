"""Writing a study's report files: both or neither, never a half-written page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunelabError
from tuner.export.errors import ExportError
from tuner.export.files import write_all
from tuner.lab.study import Study
from tuner.trials.store import StoreError, TrialStore


class ReportError(TunelabError):
    """The report cannot be made (no such study, unreadable store, unwritable folder)."""


@dataclass(frozen=True)
class WrittenReport:
    """Where the report went, and how many trials it covers."""

    html: Path
    markdown: Path
    trials: int


def write_report(
    out_dir: str | Path,
    *,
    study: str | None = None,
    store_path: str | Path | None = None,
) -> WrittenReport:
    """Renders ``study`` (default: the study with the newest trial) into ``out_dir``.

    Raises:
        ReportError: no trials, an unknown study, or a folder that cannot be written.
    """
    # The renderers pull in matplotlib (~0.5 s): imported here, only when a report is made.
    from tuner.report.data import collect

    # Deferred: the report writers (matplotlib) load only when a report is made.
    from tuner.report.html import render_html

    # Deferred: the report writers (matplotlib) load only when a report is made.
    from tuner.report.markdown import render_markdown

    try:
        with TrialStore(store_path) as store:
            name = study or _newest_study(store)
            data = collect(Study(store, name))
    except StoreError as exc:
        raise ReportError(f"cannot read the trial store: {exc}") from None
    if not data.rows:
        raise ReportError(
            f"study {name!r} has no trials",
            fix="list the studies with `tunelab results --json` and pass --study NAME",
        )
    texts = {"report.html": render_html(data), "report.md": render_markdown(data)}
    folder = Path(out_dir).expanduser()
    _write_all(folder, texts)
    return WrittenReport(folder / "report.html", folder / "report.md", len(data.rows))


def _newest_study(store: TrialStore) -> str:
    studies = store.studies()
    if not studies:
        raise ReportError(
            "the trial store holds no trials yet",
            fix="run a trial first: `tunelab run` (or `r` in the TUI)",
        )
    return max(studies, key=lambda s: s.last_at).name


def _write_all(folder: Path, texts: dict[str, str]) -> None:
    """Both files or neither: the export's all-or-nothing writer (tuner.export.files)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_all([(folder / name, text, 0o644) for name, text in texts.items()], force=True)
    except OSError as exc:
        raise ReportError(f"cannot create {folder}: {exc.strerror}") from None
    except ExportError as exc:
        raise ReportError(f"cannot write the report: {exc}") from None
