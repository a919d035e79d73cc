"""Workload and objective: lengths, concurrency or rate, prompts, SLO.

Each edit builds a ``tuner.bench.Workload`` (which validates itself) and
posts it up; a bad field is marked and its sentence posted instead, so Run
never starts with a half-valid workload.
"""

from __future__ import annotations

import math

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label

from tui.messages import WorkloadChanged
from tuner.bench.workload import Workload, WorkloadError, parse_slo

FIELDS = (
    ("in", "input_len", "input tokens per request"),
    ("out", "output_len", "output tokens per request"),
    ("conc", "concurrency", "requests in flight (empty: unbounded)"),
    ("n", "num_prompts", "measured requests"),
    ("rate", "request_rate", "arrivals per second (inf: all at once)"),
    ("slo", "slo", "goodput objectives in ms, e.g. ttft:500,itl:50"),
)


def workload_from_texts(texts: dict[str, str], warmup: int) -> Workload:
    """Builds the workload from the panel's field texts.

    Raises:
        WorkloadError: naming the field and the valid range.
    """

    def whole(name: str, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise WorkloadError(f"{name} must be a whole number, not {text!r}") from None

    conc_text = texts["concurrency"].strip()
    rate_text = texts["request_rate"].strip().lower() or "inf"
    try:
        rate = math.inf if rate_text == "inf" else float(rate_text)
    except ValueError:
        raise WorkloadError(
            f"rate must be a number of requests/s or inf, not {rate_text!r}"
        ) from None
    return Workload(
        input_len=whole("in", texts["input_len"].strip()),
        output_len=whole("out", texts["output_len"].strip()),
        num_prompts=whole("n", texts["num_prompts"].strip()),
        concurrency=whole("conc", conc_text) if conc_text else None,
        request_rate=rate,
        slo=parse_slo(texts["slo"]),
        warmup_requests=warmup,
    )


class WorkloadPanel(Vertical):
    """Six compact inputs on two rows."""

    def __init__(self, workload: Workload, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.initial = workload

    def compose(self) -> ComposeResult:
        w = self.initial
        values = {
            "input_len": str(w.input_len),
            "output_len": str(w.output_len),
            "concurrency": "" if w.concurrency is None else str(w.concurrency),
            "num_prompts": str(w.num_prompts),
            "request_rate": "inf" if math.isinf(w.request_rate) else str(w.request_rate),
            "slo": ",".join(f"{k}:{v:g}" for k, v in w.slo.items()),
        }
        for row in (FIELDS[:3], FIELDS[3:]):
            with Horizontal(classes="wl-row"):
                for label, name, tip in row:
                    yield Label(label, classes="wl-label")
                    box = Input(values[name], id=f"wl-{name}", compact=True, classes=f"wl-{label}")
                    box.tooltip = tip
                    yield box

    def on_mount(self) -> None:
        self.border_title = "Workload"

    def texts(self) -> dict[str, str]:
        return {name: self.query_one(f"#wl-{name}", Input).value for _, name, _ in FIELDS}

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        try:
            workload = workload_from_texts(self.texts(), self.initial.warmup_requests)
        except WorkloadError as exc:
            event.input.add_class("-invalid")
            self.border_subtitle = "invalid"
            self.post_message(WorkloadChanged(None, str(exc)))
            return
        for box in self.query(Input):
            box.remove_class("-invalid")
        self.border_subtitle = ""
        self.post_message(WorkloadChanged(workload))
