"""One real vLLM OpenAI-compatible server: start, wait until healthy, watch, stop.

``async with Engine(spec) as eng`` is the whole lifecycle. Start-up polls the
process every 100 ms beside the /health probe, so a server that dies is
reported at once with the error from its log, not at the timeout. The log is
read by a thread that writes it to the trial's log file and forwards each
line as an event on the event loop. Stopping ends the whole process tree, and
a reaper sidecar ends it anyway if tunelab itself is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from types import TracebackType

from tuner import policy
from tuner.bench.tls import verify_for
from tuner.engine import logscan, proctree, running
from tuner.engine.events import (
    EngineBackendChosen,
    EngineEvent,
    EngineExited,
    EngineFailed,
    EngineLog,
    EngineReady,
    EngineStarting,
    EngineStopped,
    EventCallback,
)
from tuner.engine.ipc_dir import IPC_ENV, make_ipc_dir, remove_ipc_dir
from tuner.engine.ports import free_port
from tuner.engine.spec import EngineSpec
from tuner.errors import RunFailedError
from tuner.redact import redact_argv

PORT_RETRIES = 3
_TAIL_LINES = 400


class EngineStartError(RunFailedError, RuntimeError):
    """The engine did not become healthy; ``reason`` says why, ``log_tail`` shows the end of its log."""

    def __init__(self, reason: str, log_tail: list[str], *, port_in_use: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail
        self.port_in_use = port_in_use


class Engine:
    """A running vLLM server for one EngineSpec.

    Attributes:
        url: Base URL (``http://127.0.0.1:PORT``) once started.
        backend: Attention backend vLLM reported (or that its platform implies).
        backend_inferred: True when the backend was not in the log but implied.
        startup_seconds: Launch to healthy, of the successful attempt.
        exited: Set as soon as the server dies without being asked to.
        failure_reason: Why it died, when ``exited`` is set.
    """

    def __init__(self, spec: EngineSpec, on_event: EventCallback | None = None) -> None:
        self.spec = spec
        self._on_event = on_event
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._lines_read = 0
        self._known: set[proctree.ProcRef] = set()
        self._monitor: asyncio.Task[None] | None = None
        self._stopping = False
        self.port: int | None = None
        self.url: str | None = None
        self.backend: str | None = None
        self.backend_inferred = False
        self.rejected_backend: str | None = None
        self.startup_seconds: float | None = None
        self.exited = asyncio.Event()
        self.failure_reason: str | None = None
        self.returncode: int | None = None
        self.ipc_dir: Path | None = None

    # -- public API -------------------------------------------------------
    @property
    def served_model(self) -> str:
        return self.spec.served_model

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def tree_pids(self) -> set[int]:
        """Pids of the live engine tree (root, engine core, workers)."""
        if not self._proc:
            return set()
        refs = proctree.tree(self._proc.pid, self._proc.pid) | self._known
        return {r.pid for r in proctree.alive(refs)}

    def log_tail(self, n: int = 25) -> list[str]:
        return logscan.meaningful_tail(list(self._tail), n)

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Launches the server and returns once /health answers; raises EngineStartError.

        The last gate of tunelab's policy (:mod:`tuner.policy`): a config the user did not
        consent to (code-loading arguments, variables not known to be data, secrets) never
        becomes a process, whichever face or study built it.
        """
        self._loop = asyncio.get_running_loop()
        refused = policy.violations(self.spec.config)
        if refused:
            reason = policy.PolicyError(refused).message
            self._emit(EngineFailed(reason, ()))
            raise EngineStartError(reason, [])
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        attempts = PORT_RETRIES if self.spec.port is None else 1
        for attempt in range(1, attempts + 1):
            port = self.spec.port or free_port(self.spec.host)
            try:
                await self._start_once(port, attempt)
                return
            except EngineStartError as err:
                await self._kill()
                if err.port_in_use and attempt < attempts:
                    self._emit(
                        EngineLog(f"[tunelab] port {port} was taken; retrying on another port")
                    )
                    continue
                self._emit(EngineFailed(err.reason, tuple(err.log_tail)))
                raise
            except BaseException:
                await self._kill()
                raise

    async def stop(self, graceful: float = 10.0) -> None:
        """Ends the whole process tree (SIGINT, then SIGTERM, then SIGKILL)."""
        self._stopping = True
        if self._monitor:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._monitor
            self._monitor = None
        if not self._proc:
            return
        started = time.monotonic()
        await self._kill(graceful)
        self._emit(EngineStopped(self.returncode, time.monotonic() - started))

    # -- internals --------------------------------------------------------
    async def _start_once(self, port: int, attempt: int) -> None:
        spec = self.spec
        argv = spec.argv(port)
        self._tail.clear()
        self.port = port
        self.url = f"http://{_url_host(spec.host)}:{port}"
        log = open(spec.log_path, "ab")  # noqa: SIM115 - closed by the reader thread
        log.write(f"[tunelab] $ {' '.join(redact_argv(argv))}\n".encode())
        log.flush()
        started = time.monotonic()
        env = spec.environment()
        if IPC_ENV not in env:  # vLLM's sockets in a directory removed with the engine
            self.ipc_dir = make_ipc_dir()
            env[IPC_ENV] = str(self.ipc_dir)
        try:
            self._proc = subprocess.Popen(
                argv,
                env=env,
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            remove_ipc_dir(self.ipc_dir)
            raise EngineStartError(
                f"could not start {argv[0]!r}: {exc.strerror or exc}. Is vLLM installed for "
                f"{spec.python}? Run `tunelab doctor`.",
                [],
            ) from None
        self._known = {r for r in [proctree.ref(self._proc.pid)] if r}
        running.register(self._proc.pid)
        self._reaper = _start_reaper(self._proc.pid, self.ipc_dir)
        self._reader = threading.Thread(
            target=self._read_output, args=(self._proc, log), name="engine-log", daemon=True
        )
        self._reader.start()
        self._emit(EngineStarting(self._proc.pid, port, tuple(argv), attempt))
        await self._wait_healthy(started)
        self.startup_seconds = time.monotonic() - started
        if self.backend is None:
            self._infer_backend()
        self._emit(EngineReady(self.url, self.startup_seconds))
        self._monitor = asyncio.create_task(self._watch(), name="engine-monitor")

    async def _wait_healthy(self, started: float) -> None:
        # Deferred: heavy (httpx): loaded only on the path that needs it.
        import httpx

        assert self._proc is not None
        deadline = started + self.spec.startup_timeout
        last_scan = 0.0
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(2.0, connect=0.5),
            trust_env=False,
            verify=verify_for(self.url or ""),
        ) as client:
            while True:
                rc = self._proc.poll()
                if rc is not None:
                    self.returncode = rc
                    await asyncio.to_thread(self._drain_reader, 2.0)
                    lines = list(self._tail)
                    raise EngineStartError(
                        logscan.failure_reason(lines, rc),
                        logscan.meaningful_tail(lines),
                        port_in_use=logscan.port_in_use(lines),
                    )
                now = time.monotonic()
                if now > deadline:
                    lines = list(self._tail)
                    raise EngineStartError(
                        f"vLLM did not become healthy within {self.spec.startup_timeout:.0f} s "
                        "(start-up timeout); the engine was stopped. Raise the timeout or read "
                        f"the log: {self.spec.log_path}",
                        logscan.meaningful_tail(lines),
                    )
                if now - last_scan > 1.0:
                    self._known |= proctree.tree(self._proc.pid, self._proc.pid)
                    last_scan = now
                with contextlib.suppress(httpx.HTTPError, OSError):
                    resp = await client.get(f"{self.url}/health")
                    if resp.status_code == 200:
                        return
                await asyncio.sleep(0.1)

    async def _watch(self) -> None:
        """After ready: notices within ~100 ms that the server or any member of its tree died.

        The members are the processes alive at ready (API server, engine core,
        workers, vLLM's helpers); they live until shutdown, so one vanishing is
        a crash even before the API server notices (it takes seconds to exit
        after its engine core dies). Nothing here goes by process name.
        """
        assert self._proc is not None
        members = {
            m: m.name() for m in proctree.alive(proctree.tree(self._proc.pid, self._proc.pid))
        }
        self._known |= set(members)
        ready_mark = self._lines_read
        while not self._stopping:
            rc = self._proc.poll()
            dead = next((m for m in members if not m.alive()), None)
            if rc is not None or dead is not None:
                self.returncode = rc
                if rc is not None:
                    await asyncio.to_thread(self._drain_reader, 1.0)
                    reason = logscan.failure_reason(list(self._tail), rc)
                else:
                    assert dead is not None
                    reason = f"{members[dead]} (pid {dead.pid}) died"
                    logged = logscan.last_error(self._lines_since(ready_mark))
                    if logged:
                        reason += f"; engine log: {logged}"
                self.failure_reason = reason
                self.exited.set()
                self._emit(EngineExited(rc, reason))
                return
            await asyncio.sleep(0.05)

    async def _kill(self, graceful: float = 10.0) -> None:
        proc = self._proc
        if proc is None:
            return
        known = self._known
        await asyncio.to_thread(proctree.kill_tree, proc.pid, known=known, graceful=graceful)
        with contextlib.suppress(Exception):
            self.returncode = await asyncio.to_thread(proc.wait, 10)
        running.unregister(proc.pid)
        await asyncio.to_thread(self._drain_reader, 2.0)
        if self._reaper is not None:
            with contextlib.suppress(Exception):
                self._reaper.kill()
                await asyncio.to_thread(self._reaper.wait, 5)
            self._reaper = None
        remove_ipc_dir(self.ipc_dir)  # the tree is gone: nothing uses its sockets any more

    def _lines_since(self, mark: int) -> list[str]:
        """The log lines read after the ``mark``-th line (as far as the tail reaches)."""
        new = self._lines_read - mark
        return list(self._tail)[-new:] if new > 0 else []

    def _drain_reader(self, timeout: float) -> None:
        if self._reader is not None:
            self._reader.join(timeout)

    def _read_output(self, proc: subprocess.Popen[bytes], log: object) -> None:
        """Thread: copies the server's output to the log file and to events."""
        assert proc.stdout is not None
        try:
            for raw in iter(proc.stdout.readline, b""):
                log.write(raw)  # type: ignore[attr-defined]
                log.flush()  # type: ignore[attr-defined]
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self._tail.append(line)
                self._lines_read += 1
                if self.backend is None:
                    name = logscan.backend_from_line(line)
                    if name:
                        self.backend = name
                        self._emit_threadsafe(EngineBackendChosen(name))
                rejected = logscan.rejected_backend(line)
                if rejected:
                    self.rejected_backend = rejected
                self._emit_threadsafe(EngineLog(line))
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                log.close()  # type: ignore[attr-defined]

    def _infer_backend(self) -> None:
        """vLLM's CPU platform logs no choice for non-MLA models: it always uses CPU_ATTN."""
        text = "\n".join(self._tail)
        if "device_config=cpu" in text or "CPU KV cache size" in text:
            self.backend = "CPU_ATTN"
            self.backend_inferred = True
            self._emit(EngineBackendChosen("CPU_ATTN", inferred=True))

    def _emit(self, event: EngineEvent) -> None:
        if self._on_event is not None:
            # A watcher's bug must not take the engine down with it.
            with contextlib.suppress(Exception):
                self._on_event(event)

    def _emit_threadsafe(self, event: EngineEvent) -> None:
        loop = self._loop
        if self._on_event is None or loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._emit, event)


def _start_reaper(root: int, ipc_dir: Path | None = None) -> subprocess.Popen[bytes] | None:
    """Starts the watchdog that kills the tree (and removes its IPC directory) if tunelab dies."""
    argv = [sys.executable, "-m", "tuner.engine.reaper", "--parent", str(os.getpid())]
    argv += ["--root", str(root)]
    if ipc_dir is not None:
        argv += ["--ipc-dir", str(ipc_dir)]
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
    except OSError:
        return None


def _url_host(host: str) -> str:
    if host in {"0.0.0.0", ""}:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
