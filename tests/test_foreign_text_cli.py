"""Foreign text printed by the CLI: no terminal escapes, no bidi controls, no CSV formulas (issue 26).

``presets list`` shows names, targets and descriptions from the files in the
user's preset folder; ``results --csv`` writes study names, knob values and
failure reasons for a spreadsheet. Both go through the real commands here.
The one rule is :func:`tuner.foreign_text.clean` (re-exported by
:mod:`tuner.cli.safe_text`): escapes and controls removed, invisible
formatting characters shown as ``<U+XXXX>``.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner import paths
from tuner.bench.workload import Workload
from tuner.cli import presets as presets_cli
from tuner.cli import trials as trials_cli
from tuner.cli.safe_text import clean, markup
from tuner.config import EngineConfig
from tuner.trials.export import csv_cell
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
RAW = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}\u2028\u2029]")


def _invoke(register: object, *args: str) -> tuple[int, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)  # type: ignore[operator]
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.output


def test_clean_shows_bidi_and_invisible_characters_and_drops_controls() -> None:
    assert clean("a\u202eb\u2066c\u2069d") == "a<U+202E>b<U+2066>c<U+2069>d"
    assert clean("\u200e\u200f\u061c") == "<U+200E><U+200F><U+061C>"
    assert clean("x\u2028y\ufeffz\u200bw") == "x<U+2028>y<U+FEFF>z<U+200B>w"
    assert clean("\ud800") == "<U+D800>"  # a lone surrogate: unencodable, printing it raised
    assert clean("a\x1b[2Jb\x9b1mc\x85d\re") == "abcde"
    assert clean("tab\there\nnext") == "tab\there\nnext"
    assert clean("\u0627\u200c\u0628 e\u0301") == "\u0627\u200c\u0628 e\u0301"  # ZWNJ, marks kept
    assert markup("[bold]\u202e") == "\\[bold]<U+202E>"


def _user_preset(name: str, description: str) -> Path:
    folder = paths.data_dir() / "presets"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    desc = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or not c.isprintable() else c
        for c in description.replace("\\", "\\\\").replace('"', '\\"')
    )
    path.write_text(
        f'[preset]\nname = "{name}"\ndescription = "{desc}"\nschema_version = 1\n\n'
        '[target]\nmodel = "org/m\\u001b]0;title\\u0007"\nvllm_version = "0.10.2"\n'
        'platform = "rocm"\n\n[engine]\nmax-num-seqs = 8\n'
    )
    return path


def test_presets_list_prints_user_presets_cleanly() -> None:
    _user_preset("mine", "fast\x1b[2J\x1b]8;;http://evil\x07link\u202eevil\nFAKE-ROW  [shipped]")
    broken = paths.data_dir() / "presets" / "bad\x1b[31m\u202ename.toml"
    broken.write_text("not = [valid toml")
    code, out = _invoke(presets_cli.register, "presets", "list")
    assert code == 0, out
    assert not RAW.search(out), repr(out)
    assert "  fastlink<U+202E>evil FAKE-ROW  [shipped]" in out  # one line: no fake row
    assert "org/m" in out and "title" not in out
    assert "bad<U+202E>name" in out and "BROKEN" in out


def _store_hostile() -> None:
    cfg = EngineConfig(
        model="org/m",
        env={"VLLM_X": '=HYPERLINK("http://evil","x")'},
        engine={"max-num-seqs": -1, "served-model-name": "+cmd|' /C calc'!A0", "seed": "-1"},
    )
    with TrialStore() as store:
        trial = Trial(cfg, Workload(input_len=8, output_len=8, num_prompts=4), study="@SUM(1)")
        store.add(trial)
        store.save_result(trial, {"output_throughput": -2.5, "completed": 4, "failed": 0})
        failed = Trial(cfg, Workload(), study="\x1b[2Jst\u202eudy")
        store.add(failed)
        store.update_status(failed, TrialStatus.FAILED, failure_reason="-2+3+cmd\x1b]0;x\x07")


def test_results_csv_defuses_formulas_and_keeps_numbers() -> None:
    _store_hostile()
    code, out = _invoke(trials_cli.register, "results", "--csv")
    assert code == 0, out
    assert not RAW.search(out.replace("\n", "")), repr(out)
    rows = list(csv.DictReader(io.StringIO(out)))
    by_study = {r["study"]: r for r in rows}
    assert set(by_study) == {"'@SUM(1)", "st<U+202E>udy"}
    row = by_study["'@SUM(1)"]
    assert row["set:VLLM_X"] == '\'=HYPERLINK("http://evil","x")'
    assert row["set:served-model-name"] == "'+cmd|' /C calc'!A0"
    assert row["set:max-num-seqs"] == "-1"  # a number stays a number
    assert row["set:seed"] == "-1"  # a number written as text too
    assert row["output_throughput"] == "-2.5"
    assert by_study["st<U+202E>udy"]["failure_reason"] == "'-2+3+cmd"
    for cells in rows:
        for cell in cells.values():
            assert not cell or cell[0] not in "=+-@\t\r" or re.fullmatch(r"-[\d.]+", cell), cell


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "+1"),
        ("-1.5e3", "-1.5e3"),
        ("-", "'-"),
        ("@x", "'@x"),
        ("\t=1", "'\t=1"),
        ("\uff1d1+1", "'\uff1d1+1"),
        ("\x1b[31m=1", "'=1"),  # the escape is removed first, then the formula seen
        ("plain", "plain"),
        (-3, -3),
        (2.5, 2.5),
        (None, ""),
    ],
)
def test_csv_cell(value: object, cell: object) -> None:
    assert csv_cell(value) == cell
