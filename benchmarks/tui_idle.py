"""The TUI's idle CPU use with 8 GPUs sampled at 2 Hz, and its time to first paint.

The app runs for real in a pseudo-terminal (a child process, its output read
and discarded by this one, as a terminal emulator would), with the GPU panel
fed by the amdsmi backend over the FAKE amdsmi module of ``tests/fakes`` (8
MI355X GPUs; no GPU exists here) at 2 Hz, its numbers made to move on every
read so the panel really repaints, and a recorded introspection answer.
Measured:

* time to first paint: from starting the child to the first frame on the
  terminal that shows the status bar (the node name), with the CPU time the
  child had used by then (the figure that does not depend on other load);
* time to a usable screen: to the first knob row on the terminal (the rows
  mount after the first frame; issue 32's goal: under 1.0 s, warm cache);
* idle CPU: the child's CPU time (all its threads: event loop, sampler, GPU
  readers) over a window after warm-up, as a share of one core.

Goals (issue 13): idle under 1 % of one core, first paint under 0.5 s, on a quiet
box. On a shared box the wall-clock paint time follows the load; the CPU used
by then does much less, so compare both side by side (same session, medians).

The child's byte-code caches are written first (a default Python writes them on
the first start; this box sets ``PYTHONDONTWRITEBYTECODE``), and its terminal is
sized before it starts, as an emulator does (sized later, Textual's first frame
is redrawn for the new size). The idle figure is split by thread: the UI event
loop and the sampler are tunelab's; the GPU reads are the FAKE backend's (a real
driver costs what it costs); the rest is Textual's terminal I/O (its input
thread sleeps between keys: tui/quiet_driver.py).

Run: ``.venv/bin/python benchmarks/tui_idle.py [--seconds 20] [--gpus 8]``.

Side by side: ``--against REF --pairs 5`` runs the measurement alternately on a
git worktree of ``REF`` and on this tree, and prints each pair, the medians
and the median ratio. A shared box's speed drifts by the hour (a bare Textual
app measured 0.18 % and 0.40 % an hour apart here): only pairs compare.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[1]
NODE = "bench-node"


class Moving:
    """Wraps the fake backend so every read differs (a real busy GPU's numbers move each tick).

    The fake amdsmi module answers the same values every call, which would let
    the panel skip its repaints and flatter the figure.
    """

    def __init__(self, backend: object) -> None:
        self.backend = backend
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.backend, name)

    def snapshot(self, index: int) -> object:
        import dataclasses

        snap = self.backend.snapshot(index)  # type: ignore[attr-defined]
        self.calls += 1
        if snap.error:
            return snap
        wiggle = (self.calls * 37 + index * 11) % 100
        return dataclasses.replace(
            snap,
            gfx_activity=float(wiggle),
            power_w=None if snap.power_w is None else snap.power_w - wiggle,
            temp_hotspot=None if snap.temp_hotspot is None else snap.temp_hotspot + wiggle % 7,
        )


def bare_child() -> None:
    """The floor: a bare Textual app (one line with the node, a footer) on the same terminal."""
    from textual.app import App, ComposeResult
    from textual.widgets import Footer, Static

    class Bare(App[None]):
        BINDINGS = [("q", "quit", "Quit")]  # noqa: RUF012 (Textual's own form)

        def compose(self) -> ComposeResult:
            yield Static(f" {NODE} ")
            yield Footer()

    Bare().run()


def child(rate_hz: float, gpus: int) -> None:
    """The app, as a user would run it, with the fake GPU backend."""
    sys.path.insert(0, str(REPO))
    from tests.support.tui_harness import fake_amd_backend, recorded_vllm_info
    from tui.app import TunelabApp
    from tui.services import Services
    from tuner.telemetry import Backend

    def backend() -> object:
        if gpus == 0:
            from tests.support.tui_harness import no_gpu_backend

            return no_gpu_backend()
        b = fake_amd_backend("mi355x")
        assert b.count() == gpus, f"the fake node has {b.count()} GPUs"
        return Moving(b)

    services = Services(
        node=NODE,
        introspect=recorded_vllm_info,
        telemetry=cast("Callable[[], Backend]", backend),  # Moving stands in for a Backend
        telemetry_rate_hz=rate_hz,
    )
    TunelabApp(model="tunelab:demo", services=services).run()


THREADS_ENV = "TUNELAB_BENCH_THREADS"
NAMER = "bench-thread-names"  # this script's helper in the child: reported apart from the app


def _name_threads(path: Path) -> None:
    """Write {native thread id: Python name} once a second, for the parent's per-thread split."""
    while True:
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(names))
        tmp.replace(path)
        time.sleep(1.0)


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid`` (nanosecond schedstat, not 10 ms clock ticks)."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, ValueError):
            out[int(tid)] = (
                int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]) / 1e9
            )
    return out


def role(name: str) -> str:
    """Which part of the app a thread is (the split the idle figure is reported by)."""
    if name == "MainThread":
        return "UI event loop"
    if name == "tunelab-sampler":
        return "telemetry sampler"
    if name.startswith("tunelab-gpu"):
        return "GPU reads (the FAKE backend's cost)"
    if name == NAMER:
        return "this benchmark's thread-name helper (not the app)"
    return "other (Textual's terminal I/O, workers)"


def read_for(fd: int, seconds: float, until: bytes | None = None) -> tuple[bytes, float | None]:
    """Drain the pty for ``seconds``; returns what was read and when ``until`` first appeared."""
    buf = b""
    seen_at = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        if until is not None and seen_at is None:
            buf = (buf + data)[-200000:]
            if until in buf:  # the first paint: return now, so the CPU read next is at paint time
                return buf, time.monotonic()
    return buf, seen_at


def _first_knob_row() -> str:
    """The first knob the panel lists on the recorded target (vLLM 0.32.0 on cpu)."""
    from tuner import knobs

    group = knobs.group_order("0.32.0", "cpu")[0]
    return knobs.applicable_first(knobs.groups()[group], "0.32.0", "cpu")[0].key


IDLE_LINE = re.compile(r"idle CPU, .*?: ([0-9.]+) % of one core")
SPLIT_LINE = re.compile(r"^  (UI event loop|GPU reads[^:]*): ([0-9.]+) %", re.MULTILINE)


def _one(tree: Path, argv: list[str]) -> dict[str, float]:
    """One measurement by this script in ``tree``: the total and its split, in % of a core."""
    out = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / "tui_idle.py"), *argv],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = IDLE_LINE.search(out)
    if found is None:
        raise SystemExit(f"no idle figure in the output of {tree}:\n{out}")
    figures = {"total": float(found.group(1))}
    figures.update({name.split(" (")[0]: float(v) for name, v in SPLIT_LINE.findall(out)})
    return figures


def pairs(against: str, count: int, argv: list[str]) -> int:
    """Alternate runs on a worktree of ``against`` and on this tree; print medians and ratios."""
    base = Path(tempfile.mkdtemp(prefix="tunelab-idle-base-")) / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base), against],
        check=True,
    )
    runs: dict[str, list[dict[str, float]]] = {against: [], "this tree": []}
    try:
        for n in range(count):
            for name, tree in ((against, base), ("this tree", REPO)):
                runs[name].append(_one(tree, argv))
                shown = ", ".join(f"{k} {v:.2f} %" for k, v in runs[name][-1].items())
                print(f"pair {n + 1} {name}: {shown}", flush=True)
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False
        )
    for name, figures in runs.items():
        keys = figures[0].keys()
        shown = ", ".join(f"{k} {statistics.median(f[k] for f in figures):.2f} %" for k in keys)
        print(f"median of {count}, {name}: {shown}")
    ratios = [
        b["total"] / a["total"] for a, b in zip(runs[against], runs["this tree"], strict=True)
    ]
    listed = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"ratio this tree / {against} per pair: {listed}; median {statistics.median(ratios):.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="idle window measured")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring")
    parser.add_argument("--rate", type=float, default=2.0, help="telemetry rate (Hz)")
    parser.add_argument(
        "--gpus", type=int, default=8, help="8 (the fake node), or 0: no GPU, for comparison"
    )
    parser.add_argument(
        "--bare", action="store_true", help="time a bare Textual app instead: the floor"
    )
    parser.add_argument("--against", help="a git ref: measure it and this tree alternately")
    parser.add_argument("--pairs", type=int, default=5, help="with --against: how many pairs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.against:
        argv = ["--seconds", str(args.seconds), "--warmup", str(args.warmup)]
        argv += ["--rate", str(args.rate), "--gpus", str(args.gpus)]
        return pairs(args.against, args.pairs, argv + (["--bare"] if args.bare else []))
    if args.child:
        names_path = os.environ.get(THREADS_ENV)
        if names_path:
            threading.Thread(
                target=_name_threads, args=(Path(names_path),), name=NAMER, daemon=True
            ).start()
        bare_child() if args.bare else child(args.rate, args.gpus)
        return 0

    import psutil

    home = tempfile.mkdtemp(prefix="tunelab-bench-")
    # A user's second start finds the demo model in the cache; build it first so the
    # figure is the app's own start, not the one-off model generation.
    os.environ["TUNELAB_HOME"] = home
    sys.path.insert(0, str(REPO))
    from tuner.demo_model import ensure_demo_model

    ensure_demo_model()
    # A default Python caches byte code on the first start; this box may set
    # PYTHONDONTWRITEBYTECODE, which would compile ~90 modules on every start.
    # Measure the user's second start: caches in place, as on a default Python.
    import compileall

    for package in ("tui", "tuner", "tests/support"):
        compileall.compile_dir(REPO / package, quiet=1)
    names_file = Path(home) / "threads.json"
    env = dict(
        os.environ,
        TUNELAB_HOME=home,
        TERM="xterm-256color",
        COLUMNS="160",
        LINES="48",
        **{THREADS_ENV: str(names_file)},
    )
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        # The child: size its terminal first, as a terminal emulator does, then become the app.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        os.execve(
            sys.executable,
            [
                sys.executable,
                __file__,
                "--child",
                "--rate",
                str(args.rate),
                "--gpus",
                str(args.gpus),
                *(["--bare"] if args.bare else []),
            ],
            env,
        )
    first_frame, painted = read_for(fd, 30.0, until=NODE.encode())
    if painted is None:
        print("the app did not paint its status bar within 30 s", file=sys.stderr)
        os.kill(pid, signal.SIGKILL)
        return 1
    first_paint = painted - t0
    proc = psutil.Process(pid)
    paint_cpu = sum(proc.cpu_times()[:2])
    # Usable: the knob rows drawn, not only the frame (issue 32). The marker is the first
    # row the panel shows on this target: the first applicable knob of the first group.
    marker = _first_knob_row().encode()
    usable_at: float | None = painted
    if marker not in first_frame and not args.bare:
        _, usable_at = read_for(fd, 30.0, until=marker)
    usable = None if usable_at is None or args.bare else usable_at - t0
    usable_cpu = sum(proc.cpu_times()[:2])
    read_for(fd, args.warmup)
    cpu0 = proc.cpu_times()
    threads0 = thread_cpu(pid)
    w0 = time.monotonic()
    read_for(fd, args.seconds)
    cpu1 = proc.cpu_times()
    threads1 = thread_cpu(pid)
    wall = time.monotonic() - w0
    names = {int(k): v for k, v in json.loads(names_file.read_text()).items()}
    split: dict[str, float] = {}
    for tid, seconds in threads1.items():
        used_by = role(names.get(tid, ""))
        split[used_by] = split.get(used_by, 0.0) + seconds - threads0.get(tid, 0.0)
    helper = role(NAMER)
    # The app's CPU: the whole process less this script's own helper thread.
    used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system) - split.pop(helper, 0.0)
    threads = proc.num_threads()
    os.write(fd, b"q")
    read_for(fd, 3.0)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    share = used / wall * 100
    what = "bare Textual app" if args.bare else f"{args.gpus} fake GPUs at {args.rate:g} Hz"
    print(
        f"time to first paint: {first_paint:.2f} s (goal < 0.5 s) — includes Python and Textual start-up"
    )
    print(
        f"  CPU used by then, all the app's threads: {paint_cpu:.2f} s "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    if not args.bare:
        shown = "not within 30 s" if usable is None else f"{usable:.2f} s"
        print(
            f"time to a usable screen (knob row {marker.decode()!r} drawn): {shown} "
            f"(goal < 1.0 s); CPU used by then: {usable_cpu:.2f} s"
        )
    print(
        f"idle CPU, {what}: {share:.2f} % of one core "
        f"({used:.2f} s CPU over {wall:.1f} s; {threads} threads) (goal < 1 %)"
    )
    for used_by, seconds in sorted(split.items(), key=lambda kv: -kv[1]):
        print(f"  {used_by}: {seconds / wall * 100:.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
