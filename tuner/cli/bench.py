"""``tunelab bench``: benchmark a running OpenAI-compatible server from the shell.

The load generator the TUI's trials use too (tuner.bench.runner), run through
the lab (tuner.lab.bench.measure), with a Rich live progress line on stderr
and a results table, or the result JSON — same keys as ``vllm bench serve``
plus a ``tunelab`` block — with ``--json`` or ``--output``. Exit status: 0
when requests completed, 1 when every request failed or the run was stopped
(its deadline passed, or requests kept failing: tuner.bench.run_limits), 2 for
input tunelab cannot use (bad workload, unreachable server). Whatever the
server answers, the user sees one line naming the server's problem, never a
traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tuner.bench.errors import BenchError
from tuner.bench.run_limits import DEFAULT_MAX_CONSECUTIVE_FAILURES, BenchStopped, GuardOptionError
from tuner.bench.sessions import turn_figures
from tuner.bench.text import clean as _clean
from tuner.bench.text import shown
from tuner.bench.workload import Workload, WorkloadError
from tuner.cli import bench_options as bo
from tuner.cli.options import DEFAULT_INPUT_LEN, DEFAULT_NUM_PROMPTS, DEFAULT_OUTPUT_LEN
from tuner.errors import with_fix
from tuner.lab.bench import measure
from tuner.lab.workload import BY_NAME, parse_field

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.bench.runner import BenchResult


DeadlineOpt = Annotated[
    float | None,
    typer.Option(
        "--deadline",
        help="Stop the whole run after this many seconds (default: derived from the "
        "workload: every request's own deadline, wave after wave).",
    ),
]
MaxFailuresOpt = Annotated[
    int,
    typer.Option("--max-failures", help="Stop the run after this many failed requests in a row."),
]


def register(app: typer.Typer) -> None:
    """Adds the ``bench`` command to the tunelab CLI."""
    app.command("bench")(bench_command)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"tunelab bench: {message}", err=True)
    return typer.Exit(2)


def clean(text: str) -> str:
    """Server text without terminal escapes (tuner.bench.text, imported late for start-up)."""
    return _clean(text)


def _headers(raw: list[str], api_key_env: str | None) -> dict[str, str]:
    """Headers from ``--header 'Name: value'`` and ``--api-key-env VAR``.

    Credentials come from here rather than the URL, so they are never part of
    anything tunelab prints or stores (issue 19 "Then" 7).
    """
    out: dict[str, str] = {}
    for item in raw:
        name, sep, value = item.partition(":")
        name, value = name.strip(), value.strip()
        if (
            not sep
            or not name
            or any(c in name for c in " \t\r\n")
            or "\n" in value
            or "\r" in value
        ):
            raise _fail(f"--header must look like 'Name: value', got {item.split(':')[0]!r}:…")
        out[name] = value
    if api_key_env:
        key = os.environ.get(api_key_env, "")
        if not key:
            raise _fail(f"--api-key-env {api_key_env}: that environment variable is empty or unset")
        out["Authorization"] = f"Bearer {key}"
    return out


def _check_output(output: Path) -> None:
    """Refuse an unusable --output before the run, not after it (results lost)."""
    if output.is_dir():
        raise _fail(f"--output {output} is a directory; give a file name such as result.json")
    parent = output.parent
    if parent.exists() and not parent.is_dir():
        raise _fail(f"--output {output}: {parent} is not a directory")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise _fail(f"--output {output}: {probe} is not writable")


def _write_safely(output: Path, text: str) -> None:
    """Write ``text`` to ``output`` through a fresh temp file in the same folder.

    mkstemp creates the temp file with O_EXCL under an unpredictable name, so
    a symlink planted at a predictable ``.tmp`` name cannot redirect the
    write; os.replace then swaps it in whole (never a half-written file).
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, output)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def bench_command(
    url: bo.UrlOpt,
    model: bo.ModelNameOpt = None,
    input_len: bo.InputLenOpt = DEFAULT_INPUT_LEN,
    output_len: bo.OutputLenOpt = DEFAULT_OUTPUT_LEN,
    num_prompts: bo.NumPromptsOpt = DEFAULT_NUM_PROMPTS,
    concurrency: bo.ConcurrencyOpt = None,
    request_rate: bo.RequestRateOpt = "inf",
    burstiness: bo.BurstinessOpt = 1.0,
    range_ratio: bo.RangeRatioOpt = 0.0,
    duration: bo.DurationOpt = None,
    warmup: bo.WarmupOpt = 0,
    seed: bo.SeedOpt = 0,
    dataset: bo.DatasetOpt = None,
    dataset_kind: bo.DatasetKindOpt = "",
    time_scale: bo.TimeScaleOpt = 1.0,
    turns: bo.TurnsOpt = 1,
    think_time: bo.ThinkTimeOpt = 0.0,
    max_context: bo.MaxContextOpt = 0,
    prefix_groups: bo.PrefixGroupsOpt = 0,
    prefix_len: bo.PrefixLenOpt = 0,
    endpoint: bo.EndpointOpt = "completions",
    text_prompts: bo.TextPromptsOpt = False,
    slo: bo.SloOpt = None,
    tokenizer: bo.TokenizerOpt = None,
    request_timeout: bo.RequestTimeoutOpt = 600.0,
    stall_timeout: bo.StallTimeoutOpt = 120.0,
    as_json: bo.JsonOpt = False,
    output: bo.OutputOpt = None,
    detailed: bo.DetailedOpt = False,
    header: bo.HeaderOpt = None,
    api_key_env: bo.ApiKeyEnvOpt = None,
    deadline: DeadlineOpt = None,
    max_failures: MaxFailuresOpt = DEFAULT_MAX_CONSECUTIVE_FAILURES,
) -> None:
    """Benchmark a running vLLM (or any OpenAI-compatible) server."""
    headers = _headers(header or [], api_key_env)
    if output is not None:
        _check_output(output)
    try:
        wl = Workload(
            input_len=input_len,
            output_len=output_len,
            num_prompts=num_prompts,
            range_ratio=range_ratio,
            duration_s=duration,
            concurrency=concurrency,
            request_rate=_parsed("request_rate", request_rate),  # type: ignore[arg-type]
            burstiness=burstiness,
            warmup_requests=warmup,
            seed=seed,
            dataset_path=str(dataset) if dataset else None,
            dataset_kind=dataset_kind,
            time_scale=time_scale,
            turns=turns,
            think_time_s=think_time,
            max_context=max_context,
            prefix_groups=prefix_groups,
            prefix_len=prefix_len,
            endpoint=endpoint,  # type: ignore[arg-type]
            text_prompts=text_prompts,
            slo=_parsed("slo", slo or ""),  # type: ignore[arg-type]
            request_timeout_s=request_timeout,
            stall_timeout_s=stall_timeout,
        )
    except WorkloadError as exc:
        raise _fail(with_fix(exc)) from None
    guard = {"deadline_s": deadline, "max_consecutive_failures": max_failures}
    result = _measure(url, model, wl, tokenizer, headers, guard, live=not as_json)
    _report(result, as_json=as_json, output=output, detailed=detailed)
    if result.completed == 0:
        why = clean(result.failures.describe())
        typer.echo(f"tunelab bench: every request failed: {why}", err=True)
        raise typer.Exit(1)


def _parsed(name: str, text: str) -> object:
    """A workload field's value by tuner.lab.workload's one parser (the same as ``tunelab run``'s).

    Raises:
        WorkloadError: naming the flag and what it takes.
    """
    field = BY_NAME[name]
    return parse_field(field, text, field.flag)


def _measure(
    url: str,
    model: str | None,
    workload: Workload,
    tokenizer: str | None,
    headers: dict[str, str],
    guard: dict[str, Any],
    *,
    live: bool,
) -> BenchResult:
    """Runs the benchmark (tuner.lab.bench.measure) with the live line on stderr unless ``--json``.

    A stopped run (deadline, repeated failures) exits 1 with its reason; a
    server or workload tunelab cannot use exits 2.
    """
    with _LiveProgress(enabled=live) as progress:
        try:
            return asyncio.run(
                measure(
                    url,
                    model,
                    workload,
                    on_progress=progress.update,
                    tokenizer_path=tokenizer,
                    headers=headers,
                    **guard,
                )
            )
        except BenchStopped as exc:
            typer.echo(f"tunelab bench: {clean(with_fix(exc))}", err=True)
            raise typer.Exit(1) from None
        except (BenchError, WorkloadError, GuardOptionError) as exc:
            raise _fail(clean(with_fix(exc))) from None


def _report(result: BenchResult, *, as_json: bool, output: Path | None, detailed: bool) -> None:
    """The result JSON to ``--output`` (never lost: on stdout if it cannot be written) and
    on stdout with ``--json``, else the tables."""
    text = json.dumps(result.to_dict(detailed=detailed), indent=2, default=str)
    if output is not None:
        try:
            _write_safely(output, text)
        except OSError as exc:
            typer.echo(text)  # the measurement is not lost: it goes to stdout instead
            raise _fail(
                f"cannot write {output} ({exc.strerror or exc}); the result is above"
            ) from None
    if as_json:
        typer.echo(text)
    else:
        _print_table(result)


class _LiveProgress:
    """A one-line Rich progress bar on stderr fed by BenchProgress events."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _LiveProgress:
        if self._enabled:
            # Deferred: the progress bar loads only when a benchmark runs.
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("[bold]bench[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("bench", total=None, info="starting…")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, p: BenchProgress) -> None:
        if self._progress is None:
            return
        info = f"{p.tokens_per_s:8.0f} tok/s"
        if p.ttft_p50_ms is not None:
            info += f"  TTFT p50 {p.ttft_p50_ms:7.1f} ms  ITL p50 {p.itl_p50_ms or 0:6.1f} ms"
        if p.failed:
            info += f"  [red]{p.failed} failed[/]"
        self._progress.update(self._task, completed=p.done, total=p.total, info=info)


def _print_table(result: BenchResult) -> None:

    m = result.metrics
    console = Console()
    head = Table(
        title=f"tunelab bench — {shown(result.model)} @ {shown(result.url)}", show_header=False
    )
    head.add_column(style="bold")
    head.add_column(justify="right")
    head.add_row("Successful requests", str(result.completed))
    head.add_row("Failed requests", str(result.failed))
    head.add_row("Duration (s)", f"{m['duration']:.2f}")
    head.add_row(
        "Total input / output tokens", f"{m['total_input_tokens']} / {m['total_output_tokens']}"
    )
    head.add_row("Request throughput (req/s)", f"{m['request_throughput']:.2f}")
    if m["request_goodput"] is not None:
        head.add_row("Request goodput (req/s)", f"{m['request_goodput']:.2f}")
    head.add_row("Output token throughput (tok/s)", f"{m['output_throughput']:.1f}")
    head.add_row("Total token throughput (tok/s)", f"{m['total_token_throughput']:.1f}")
    console.print(head)
    lat = Table(title="Latency (ms)")
    for col in ("metric", "mean", "median", "std", "p90", "p99"):
        lat.add_column(col, justify="left" if col == "metric" else "right")
    for key, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E")):
        lat.add_row(
            label,
            *(f"{m[f'{s}_{key}_ms']:.2f}" for s in ("mean", "median", "std", "p90", "p99")),
        )
    console.print(lat)
    turns = turn_table(result)
    if turns is not None:
        console.print(turns)
    failures = result.failures
    for kind, count in failures.counts.items():
        example = failures.examples.get(kind, "")
        console.print(f"[red]failed: {count} × {shown(kind)}[/] — {shown(example)}")
    flags = result.flags
    for kind, count in flags.counts.items():
        example = flags.examples.get(kind, "")
        console.print(f"[yellow]flagged: {count} × {shown(kind)}[/] — {shown(example)}")
    console.print(f"[bold]steady window:[/] {steady_line(result)}")
    console.print(f"[bold]server:[/] {_server_line(result)}")
    prefix = _prefix_line(result)
    if prefix:
        console.print(f"[bold]prefix cache:[/] {prefix}")
    for note in result.server.notes:
        console.print(f"[yellow]server:[/] {shown(note)}")
    warning = result.delivery_warning()
    if warning:
        console.print(f"[yellow]delivery:[/] {warning}")
    host = result.host_warning()
    if host:
        console.print(f"[yellow]host:[/] {shown(host)}")


def turn_table(result: BenchResult) -> Table | None:
    """A sessions run's figures per turn (tuner.bench.sessions.turn_figures), else None."""
    figures = turn_figures(result.records)
    if not figures:
        return None
    cut = f"; {result.turns_cut} turns cut by --max-context" if result.turns_cut else ""
    table = Table(title=f"Per turn (the prompt is the whole history; ms){cut}")
    cols = ("turn", "sent", "answered", "prompt tokens", "TTFT p50", "TTFT p99", "ITL p50")
    for col in cols:
        table.add_column(col, justify="right")
    for t in figures:
        table.add_row(
            str(t.turn), str(t.requests), str(t.completed), f"{t.mean_prompt_len:.0f}",
            f"{t.median_ttft_ms:.2f}", f"{t.p99_ttft_ms:.2f}", f"{t.median_itl_ms:.2f}",
        )  # fmt: skip
    return table


def steady_line(result: BenchResult) -> str:
    """The steady window's throughput beside the whole run's, or why the run has none."""
    win = result.steady
    if win is None:
        why = result.steady_note or "no length"
        return f"none ({why}); the figures above are the whole run's"
    whole = result.metrics["output_throughput"]
    return (
        f"{win.output_throughput:.1f} output tok/s from {win.start_s:.2f} s (full load) to "
        f"{win.end_s:.2f} s (the last send), {win.requests} requests; whole run {whole:.1f}"
    )


def _prefix_line(result: BenchResult) -> str | None:
    """The engine's prefix-cache hit rate beside a replayed trace's block reuse (issue 30).

    Only for a trace replay, where the two are meant to be read together: the
    trace says how much a perfect prefix cache could reuse, the engine what it did.
    """
    reuse = result.trace_block_reuse
    if reuse is None:
        return None
    hit = result.server.prefix_cache_hit_rate
    engine = "not reported" if hit is None else f"{hit * 100:.0f} %"
    return f"engine hit rate {engine}, the trace's block reuse {reuse * 100:.0f} %"


def _server_line(result: BenchResult) -> str:
    """The server's own view in one line; "not sampled" where no busy scrape was read."""
    srv = result.server
    if not srv.available:
        return "server metrics: not available (no readable /metrics page)"

    def val(v: float | None, fmt: str) -> str:
        return "not sampled" if v is None else format(v, fmt)

    kv_use = srv.peak_kv_cache_usage
    if kv_use is None:
        kv = "not sampled"
    elif 0 < kv_use < 0.001:
        kv = "<0.1%"  # a tiny model's few blocks: in use, just not 0
    else:
        kv = f"{kv_use:.1%}"
    # The engine's own token gaps: the client's ITL reads 0 when a chunk carries many tokens.
    itl = "" if srv.mean_itl_ms is None else f", engine ITL mean {srv.mean_itl_ms:.2f} ms"
    return (
        f"peak running {val(srv.peak_running_requests, 'g')}, "
        f"peak waiting {val(srv.peak_waiting_requests, 'g')}, KV {kv}{itl} "
        f"({srv.busy_samples} of {srv.samples} scrapes during load)"
    )
