"""``tunelab report`` on a store full of hostile text: it writes both files and injects nothing.

Knob values, sweep tags and the study name come from users, presets and
hand-edited stores. In a figure a ``$...$`` is matplotlib mathtext (``$x^$``
raised ValueError and lost the whole report); in ``report.md`` raw HTML is
passed through by GitHub and many chat tools; bidi controls reorder what a
reader sees. The report goes through the real CLI command here.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli import report as report_cli
from tuner.config import EngineConfig
from tuner.report.markdown import _md
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

MATH = ["$x^$", "$\\frac{1}{0}$", "a$b", "$\\undefinedmacro{x}$", "$$", "$^_$"]
MARKUP = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "a|b`c`\nd\re",
    "[link](javascript:alert(1)) ![i](http://x/i.png) *em* _u_ ~~s~~",
    "ev\u202eil\u2066x\u2069\u200f",
    "esc\x1b[31mred\x1b]0;title\x07\x9b2J",
]
RESULTS = {"completed": 4, "failed": 0, "p99_ttft_ms": 9.0, "p99_itl_ms": 2.0}


def _store(db: Path, study: str, values: list[str]) -> None:
    """A sweep over ``served-model-name`` whose values (and swept knob tag) are ``values``."""
    wl = Workload(input_len=8, output_len=8, num_prompts=4)
    now = time.time()
    with TrialStore(db) as store:
        for i, value in enumerate(["base", *values]):
            for rep in range(2):
                cfg = EngineConfig(
                    model="org/m", engine={"max-num-seqs": 8, "served-model-name": value}
                )
                trial = Trial(
                    cfg,
                    wl,
                    study=study,
                    created_at=now + 2 * i + rep,
                    repeat=rep,
                    tags={"kind": "sweep", "knob": values[0], "value": value},
                    failure_reason=None,
                )
                store.add(trial)
                store.save_result(trial, {**RESULTS, "output_throughput": 100.0 + i + rep})


def _report(tmp_path: Path, study: str, values: list[str]) -> tuple[int, str, Path]:
    db = tmp_path / "t.db"
    _store(db, study, values)
    return _run_report(db, tmp_path / "out")


def _run_report(db: Path, out: Path) -> tuple[int, str, Path]:
    """``tunelab report --store DB --out OUT`` through the real command."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    report_cli.register(app)
    result = CliRunner().invoke(app, ["report", "--store", str(db), "--out", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.output, out


def test_mathtext_in_knob_values_and_tags_draws_literally(tmp_path: Path) -> None:
    code, out, folder = _report(tmp_path, "math $x^$", MATH)
    assert code == 0, out
    assert "Traceback" not in out
    page = (folder / "report.html").read_text()
    # Every value is drawn in the sweep figure as the text itself (SVG text, XML-escaped).
    figures = "".join(re.findall(r"<svg.*?</svg>", page, re.DOTALL))
    for value in MATH:
        assert html.escape(value, quote=False) in figures, value


def test_markdown_and_html_carry_no_raw_markup(tmp_path: Path) -> None:
    code, out, folder = _report(tmp_path, "<script>s</script>", MARKUP)
    assert code == 0, out
    md = (folder / "report.md").read_text()
    page = (folder / "report.html").read_text()
    for text in (md, page):
        assert "<img" not in text and "<script" not in text
        assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
        assert not re.search("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]", text)
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "ev&lt;U+202E&gt;il&lt;U+2066&gt;x&lt;U+2069&gt;&lt;U+200F&gt;" in md
    assert "ev&lt;U+202E&gt;il" in page
    # Every table row keeps its column count: no value split a row or started a new line.
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    header = rows[0]
    width = header.count("|")
    for line in rows:
        if "served-model-name" in line and "→" in line:
            assert line.count("|") - line.count("\\|") == width, line
    # A link, an image or emphasis does not form: the brackets and stars are escaped.
    assert "\\[link\\](javascript:alert(1))" in md
    assert "\\*em\\*" in md


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("<b>&", "&lt;b&gt;&amp;"),
        ("a|b", "a\\|b"),
        ("`x`", "\\`x\\`"),
        ("l1\nl2\tl3", "l1 l2 l3"),
        ("VLLM_USE_V1", "VLLM_USE_V1"),  # intraword underscores stay readable
        ("_e_ *s* $m$ ~~d~~", "\\_e\\_ \\*s\\* \\$m\\$ \\~\\~d\\~\\~"),
        ("a\\|b", "a\\\\\\|b"),
        ("\ud800", "&lt;U+D800&gt;"),  # a lone surrogate cannot be written as UTF-8
    ],
)
def test_markdown_escape(value: str, shown: str) -> None:
    assert _md(value) == shown


def test_launch_script_fence_cannot_be_closed_by_a_value(tmp_path: Path) -> None:
    # The last value is the winner (highest throughput): its script holds a ``` line.
    code, out, folder = _report(tmp_path, "fence", ["````y", "x\n```\n<img src=x onerror=1>"])
    assert code == 0, out
    md = (folder / "report.md").read_text()
    fence = re.search(r"^(`{3,})bash$", md, re.MULTILINE)
    assert fence is not None
    ticks = fence.group(1)
    assert len(ticks) == 4  # one more than the longest backtick run in the script
    body = md[fence.end() :]
    closing = body.index("\n" + ticks + "\n")
    assert "<img src=x onerror=1>" in body[:closing]  # inside the fence: shown as code
    assert "<img" not in md[: fence.start()] + body[closing:]


def test_the_launch_command_is_only_what_export_would_write(tmp_path: Path) -> None:
    """A winner whose config the policy refuses shows why, not a command export refuses."""
    db = tmp_path / "t.db"
    wl = Workload(input_len=8, output_len=8, num_prompts=4)
    with TrialStore(db) as store:
        for i, engine in enumerate(
            [{"max-num-seqs": 8}, {"max-num-seqs": 8, "tool-parser-plugin": "/tmp/pwn.py"}]
        ):
            trial = Trial(
                EngineConfig(model="org/m", engine=engine),
                wl,
                study="s",
                created_at=time.time() + i,
            )
            store.add(trial)
            store.save_result(trial, {**RESULTS, "output_throughput": 100.0 + 50 * i})
    code, output, out = _run_report(db, tmp_path / "out")
    assert code == 0, output
    for name in ("report.md", "report.html"):
        text = (out / name).read_text()
        assert "--tool-parser-plugin" not in text, name
        assert "policy refuses tool-parser-plugin" in text, name
