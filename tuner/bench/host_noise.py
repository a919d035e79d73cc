"""Was the machine quiet while a benchmark ran? CPU taken by others, measured.

A latency figure from a shared node describes the config only if nothing
else competed for the CPU while it was measured: a foreign process spinning
one core of a 2-core box doubles a CPU engine's TPOT, and a hypervisor that
steals cycles does the same to any host-side work (the API server, the
client, the scheduler). :class:`HostNoiseMeter` reads the kernel's CPU
accounting at the start and the end of a run and splits the busy time into
the run's own processes (the client with its reaped children, the local
server's process tree) and everybody else, plus the steal time. The result,
:class:`HostNoise`, travels with the bench result; a run is *contaminated*
when others took more than :data:`FOREIGN_LIMIT` of the machine or the
hypervisor stole more than :data:`STEAL_LIMIT` — a flag to re-run, never a
correction applied to the figures. Every probe is best-effort: a process that
vanishes or cannot be read is skipped, and a platform without the counters
gives ``None``, never an error.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psutil

# Shares of the whole machine (all cores) above which a run is contaminated.
# Quiet 2-core runners measured 0.4-2 % foreign (kernel threads) and 0-1 %
# steal; one busy foreign core on 2 cores is 50 %.
FOREIGN_LIMIT = 0.10
STEAL_LIMIT = 0.05
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", ""}
_TOP = 3


@dataclass(frozen=True)
class HostNoise:
    """CPU others used while a run measured, in shares of the machine.

    Attributes:
        window_s: How long the run measured.
        cores: Logical CPUs of the machine.
        foreign_share: Busy time outside the run's own processes, over
            window × cores (0.5 on 2 cores: one core fully taken).
        steal_share: Time the hypervisor gave to other guests, same scale.
        top: The busiest foreign processes: (name, CPU seconds), largest first.
        server_seen: Whether the local server's processes were found.
        foreign_known: False when the server listens on this machine but its
            processes are not visible (another user's, or in a container):
            its CPU cannot be told from others', so ``foreign_share`` is not
            judged (steal still is).
        own_cpu_s: CPU seconds the run's own processes used (client, its
            children, the local server's tree): what was subtracted.
    """

    window_s: float
    cores: int
    foreign_share: float
    steal_share: float
    top: tuple[tuple[str, float], ...] = field(default_factory=tuple)
    server_seen: bool = False
    foreign_known: bool = True
    own_cpu_s: float = 0.0

    @property
    def foreign_busy(self) -> bool:
        """Others took more than FOREIGN_LIMIT of the machine (and that can be told)."""
        return self.foreign_known and self.foreign_share > FOREIGN_LIMIT

    @property
    def contaminated(self) -> bool:
        """Whether others took enough of the machine to move a latency figure."""
        return self.foreign_busy or self.steal_share > STEAL_LIMIT

    def describe(self) -> str | None:
        """One line for the user when the run was contaminated, else None."""
        if not self.contaminated:
            return None
        parts = []
        if self.foreign_busy:
            who = ", ".join(f"{name} {cpu:.1f} s" for name, cpu in self.top)
            parts.append(
                f"other processes used {self.foreign_share:.0%} of the machine's CPU"
                + (f" ({who})" if who else "")
            )
        if self.steal_share > STEAL_LIMIT:
            parts.append(f"the hypervisor stole {self.steal_share:.0%} of the CPU")
        return "; ".join(parts) + " during the run: latencies may be inflated, run it again"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept in the result's ``tunelab`` block."""
        return {
            "window_s": round(self.window_s, 3),
            "cores": self.cores,
            "foreign_share": round(self.foreign_share, 4),
            "steal_share": round(self.steal_share, 4),
            "top": [[name, round(cpu, 2)] for name, cpu in self.top],
            "server_seen": self.server_seen,
            "foreign_known": self.foreign_known,
            "own_cpu_s": round(self.own_cpu_s, 3),
            "contaminated": self.contaminated,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostNoise:
        """Reads :meth:`to_dict`'s form back (a stored trial's result)."""
        return cls(
            window_s=float(data.get("window_s", 0.0)),
            cores=int(data.get("cores", 1)),
            foreign_share=float(data.get("foreign_share", 0.0)),
            steal_share=float(data.get("steal_share", 0.0)),
            top=tuple((str(n), float(c)) for n, c in data.get("top") or ()),
            server_seen=bool(data.get("server_seen", False)),
            foreign_known=bool(data.get("foreign_known", True)),
            own_cpu_s=float(data.get("own_cpu_s", 0.0)),
        )


def host_note(result: dict[str, Any]) -> str | None:
    """The contamination line for a stored result dict (None: quiet or not measured)."""
    block = result.get("tunelab") if isinstance(result, dict) else None
    noise = block.get("host_noise") if isinstance(block, dict) else None
    return HostNoise.from_dict(noise).describe() if isinstance(noise, dict) else None


def is_local(url: str) -> bool:
    """Whether ``url`` names this machine (its server's CPU is then on the same cores)."""
    return (urlsplit(url).hostname or "") in _LOCAL_HOSTS


def local_server_pids(url: str) -> set[int]:
    """The process tree serving ``url`` when it listens on this machine, else empty."""
    parts = urlsplit(url)
    if (parts.hostname or "") not in _LOCAL_HOSTS:
        return set()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return set()
    for conn in conns:
        laddr = conn.laddr  # an empty tuple when the socket has no address
        if conn.status == psutil.CONN_LISTEN and laddr and laddr.port == port and conn.pid:
            return _tree(conn.pid)
    return set()


def _tree(pid: int) -> set[int]:
    """``pid`` and its live descendants (the bench layer sits below tuner.engine's helpers)."""
    try:
        return {pid} | {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {pid}


def _busy(times: Any) -> float:
    """Busy CPU seconds of a system-wide cpu_times sample (idle and iowait excluded)."""
    total = 0.0
    for name in ("user", "nice", "system", "irq", "softirq"):
        total += float(getattr(times, name, 0.0) or 0.0)
    return total


def _snapshot(skip: set[int]) -> dict[tuple[int, float], tuple[str, float]]:
    """(pid, start time) -> (name, CPU seconds) of every readable process not in ``skip``."""
    out: dict[tuple[int, float], tuple[str, float]] = {}
    for proc in psutil.process_iter(["pid", "name", "create_time", "cpu_times"]):
        info = proc.info
        times = info.get("cpu_times")
        if info["pid"] in skip or times is None:
            continue
        out[(info["pid"], info.get("create_time") or 0.0)] = (
            str(info.get("name") or "?"),
            times.user + times.system,
        )
    return out


def _pids_cpu(pids: Iterable[int]) -> float:
    """Summed CPU seconds of the live processes among ``pids``, each with its reaped children.

    A child's time moves to its parent's ``children_*`` when it is reaped, so
    the sum stays continuous across a subprocess that ends.
    """
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


class HostNoiseMeter:
    """Reads the CPU accounting around one run; :meth:`stop` returns its HostNoise.

    Args:
        server_pids: The local server's processes (:func:`local_server_pids`);
            their CPU is the run's own, not noise.
        foreign_known: False when the server is local but its processes could
            not be found (see HostNoise.foreign_known).
    """

    def __init__(self, server_pids: set[int] | None = None, foreign_known: bool = True) -> None:
        self._server = set(server_pids or ())
        self._foreign_known = foreign_known
        self._started = False

    @classmethod
    def for_url(cls, url: str, also_own: set[int] | None = None) -> HostNoiseMeter:
        """The meter for a run against ``url``: its local server's tree is the run's own.

        A local server whose processes cannot be found leaves the foreign share
        unjudged. ``also_own`` adds processes whose CPU is the run's too (the
        tunelab process that started a client in a process of its own).
        """
        server = local_server_pids(url)
        meter = cls(server | set(also_own or ()), foreign_known=bool(server) or not is_local(url))
        return meter

    def start(self) -> None:
        """Takes the first reading (call right before the measured part)."""
        try:
            self._t0 = time.monotonic()
            self._sys0 = psutil.cpu_times()
            own = self._own_pids()
            self._own0 = _pids_cpu(own)
            self._procs0 = _snapshot(own)
            self._started = True
        except (psutil.Error, OSError):
            self._started = False

    def _own_pids(self) -> set[int]:
        """This process, its descendants and the server's tree (a pid in both counts once)."""
        mine = {os.getpid()}
        with contextlib.suppress(psutil.Error):
            mine |= {p.pid for p in psutil.Process().children(recursive=True)}
        return mine | self._server

    def stop(self) -> HostNoise | None:
        """Takes the second reading; None when the first failed or counters are missing."""
        if not self._started:
            return None
        try:
            window = time.monotonic() - self._t0
            sys1 = psutil.cpu_times()
            pids = self._own_pids()
            own = max(0.0, _pids_cpu(pids) - self._own0)
            procs1 = _snapshot(pids)
        except (psutil.Error, OSError):
            return None
        cores = psutil.cpu_count() or 1
        capacity = max(window, 1e-6) * cores
        foreign = max(0.0, _busy(sys1) - _busy(self._sys0) - own)
        steal = float(getattr(sys1, "steal", 0.0) or 0.0) - float(
            getattr(self._sys0, "steal", 0.0) or 0.0
        )
        used = []
        for key, (name, cpu) in procs1.items():
            before = self._procs0.get(key, (name, 0.0))[1]
            if cpu - before > 0.05:
                used.append((name, cpu - before))
        used.sort(key=lambda item: -item[1])
        return HostNoise(
            window_s=window,
            cores=cores,
            foreign_share=min(1.0, foreign / capacity),
            steal_share=min(1.0, max(0.0, steal) / capacity),
            top=tuple(used[:_TOP]),
            server_seen=bool(self._server),
            foreign_known=self._foreign_known,
            own_cpu_s=own,
        )
