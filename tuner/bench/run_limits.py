"""How long a benchmark run may take, and when repeated failures end it early.

Every request is bounded on its own (tuner.bench.client: the stall watchdog
and a deadline derived from its output length), but a run of many requests
against a server that fails each one slowly — trickling bytes or keep-alive
comments, or refusing after a long wait — could still last for hours: 1000
requests at concurrency 1 that each wait out a 120 s stall take 33 hours.
Two guards end such a run with a reason (issue 26), for ``tunelab bench``
and for every trial tunelab runs on its own engine alike, since both go
through ``tuner.bench.runner.run_benchmark``:

- **An overall deadline.** By default it is derived from the workload: a
  setup allowance, plus the time the warm-ups and the counted requests take
  if every one of them used its whole per-request deadline
  (:func:`~tuner.bench.client.request_deadline_s`: the stall allowance plus
  one second per output token, a generous multiple of any real decode
  speed), one wave of ``concurrency`` requests after another, plus the span
  of the arrival schedule (or the run's duration). A server that answers
  within the per-request bounds never reaches it: it is the backstop that
  makes "a run always ends" hold whatever goes wrong. ``deadline_s``
  (``tunelab bench --deadline SECONDS``) replaces it and then counts from
  the very start of the run.
- **A failure stop.** :data:`DEFAULT_MAX_CONSECUTIVE_FAILURES` requests in a
  row failing (warm-ups count: a server that fails them all is stopped
  before the clock starts), or, once :data:`MIN_ENDED` requests ended, more
  than :data:`MAX_FAILED_FRACTION` of them failed. ``max_consecutive_failures``
  (``tunelab bench --max-failures N``) changes the first.

Either ends the run with :class:`BenchStopped` (exit status 1), whose
message names the server's problem, e.g. "stopped after 20 consecutive
failed requests: connect error: cannot connect to 127.0.0.1:8000: ...".
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter
from collections.abc import AsyncIterator, Sequence

from tuner.bench.client import request_deadline_s
from tuner.bench.errors import BenchError
from tuner.bench.prompts import Prompt
from tuner.bench.record import RequestRecord
from tuner.bench.workload import Workload
from tuner.errors import TunelabError

DEFAULT_MAX_CONSECUTIVE_FAILURES = 20
MIN_ENDED = 40  # requests ended before the failed fraction is judged
MAX_FAILED_FRACTION = 0.75
SETUP_ALLOWANCE_S = 120.0  # closing scrapes and progress, on top of the requests' own time
MAX_DEADLINE_S = 7 * 24 * 3600.0  # a week: an event loop needs a finite timer
MAX_FAILURE_LIMIT = 1_000_000


class BenchStopped(BenchError):
    """The run was ended early (deadline, repeated failures); the message says why."""

    fix = (
        "check the server problem named above; `tunelab bench --deadline SECONDS` and "
        "`--max-failures N` change when a run is stopped"
    )


class GuardOptionError(TunelabError, ValueError):
    """A deadline or failure limit that cannot bound a run."""


def check_options(deadline_s: float | None, max_consecutive_failures: int) -> None:
    """Refuse a deadline or failure limit that cannot work.

    Raises:
        GuardOptionError: A deadline that is not a number of seconds from
            just above 0 to a week, or a failure limit that is not a whole
            number from 1 to 1,000,000.
    """
    if deadline_s is not None and not (
        isinstance(deadline_s, int | float)
        and not isinstance(deadline_s, bool)
        and 0 < deadline_s <= MAX_DEADLINE_S
    ):
        raise GuardOptionError(
            f"the run deadline must be a number of seconds above 0 and at most "
            f"{MAX_DEADLINE_S:.0f} (a week), got {deadline_s!r}",
            fix="pass --deadline SECONDS, or leave it out for the deadline derived from the workload",
        )
    n = max_consecutive_failures
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FAILURE_LIMIT:
        raise GuardOptionError(
            f"the failure limit must be a whole number from 1 to {MAX_FAILURE_LIMIT:,}, got {n!r}",
            fix=f"pass --max-failures N (default {DEFAULT_MAX_CONSECUTIVE_FAILURES})",
        )


def _waves(requests: int, concurrency: int | None) -> int:
    """How many rounds of ``concurrency`` requests ``requests`` take (1 without a cap)."""
    if requests <= 0:
        return 0
    return math.ceil(requests / concurrency) if concurrency else 1


def _longest_request_s(workload: Workload, prompts: Sequence[Prompt]) -> float:
    """The per-request deadline of the longest of ``prompts``."""
    longest = max((p.output_len for p in prompts), default=0)
    return request_deadline_s(longest, workload.request_timeout_s, workload.stall_timeout_s)


def run_deadline_s(
    workload: Workload,
    prompts: Sequence[Prompt],
    warmups: Sequence[Prompt],
    arrival_span_s: float,
) -> float:
    """The default deadline of a run, counted from when its prompts are built.

    Args:
        workload: What is sent (concurrency, rate, duration, timeouts).
        prompts: The counted prompts.
        warmups: The warm-up prompts (sent first, all awaited).
        arrival_span_s: When the last counted request is released (0 for all at once).

    Returns:
        SETUP_ALLOWANCE_S + the warm-ups' waves + the arrival span (or the
        duration) + the counted requests' waves, each wave as long as the
        longest request's own deadline.
    """
    conc = workload.concurrency
    warm_s = _waves(len(warmups), conc) * _longest_request_s(workload, warmups)
    per_request = _longest_request_s(workload, prompts)
    if workload.duration_s is None:
        span, requests = arrival_span_s, len(prompts)
    else:
        span = workload.duration_s
        rate = workload.request_rate
        # Closed loop: `concurrency` in flight at the end. Open loop: the requests
        # released during the run (twice the expected number: gamma arrivals vary).
        requests = (conc or 1) if math.isinf(rate) else math.ceil(2 * rate * span) + 1
    return SETUP_ALLOWANCE_S + warm_s + span + _waves(requests, conc) * per_request


class RunGuard:
    """Watches every ended request and the clock; ends the run with a reason when it must.

    Args:
        max_consecutive_failures: Failed requests in a row that end the run.
    """

    def __init__(self, max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES) -> None:
        self.max_consecutive = max_consecutive_failures
        self.consecutive = 0
        self.ended = 0
        self.failed = 0
        self.kinds: Counter[str] = Counter()
        self.reason = ""
        self.deadline_s: float | None = None
        self.derived = True
        self._start = 0.0
        self._timeout: asyncio.Timeout | None = None

    def record(self, rec: RequestRecord) -> None:
        """Count one ended request; stop the run when the failures say so (BenchClient.on_end)."""
        self.ended += 1
        if rec.success:
            self.consecutive = 0
            return
        self.failed += 1
        self.consecutive += 1
        self.kinds[rec.error_kind] += 1
        if self.reason:
            return
        what = f"{rec.error_kind}: {rec.error[:300]}"
        if self.consecutive >= self.max_consecutive:
            self.stop(f"stopped after {self.consecutive} consecutive failed requests: {what}")
        elif self.ended >= MIN_ENDED and self.failed > MAX_FAILED_FRACTION * self.ended:
            self.stop(
                f"stopped after {self.failed} of {self.ended} requests failed (more than "
                f"{MAX_FAILED_FRACTION:.0%}); the last: {what}"
            )

    def stop(self, reason: str) -> None:
        """End the run now with ``reason`` (the run's task is cancelled, then BenchStopped)."""
        if not self.reason:
            self.reason = reason
        if self._timeout is not None and not self._timeout.expired():
            self._timeout.reschedule(asyncio.get_running_loop().time())

    def derive(self, derived_s: float) -> None:
        """Set the deadline derived from the workload, counted from now (unless one was given)."""
        if not self.derived or self._timeout is None:
            return
        loop = asyncio.get_running_loop()
        self.deadline_s = min(loop.time() - self._start + derived_s, MAX_DEADLINE_S)
        self._timeout.reschedule(self._start + self.deadline_s)

    @contextlib.asynccontextmanager
    async def bounded(self, deadline_s: float | None = None) -> AsyncIterator[RunGuard]:
        """Run the body under the guard; raises BenchStopped when the guard ends it.

        Args:
            deadline_s: The run's deadline from now; None until :meth:`derive` sets one.

        Raises:
            BenchStopped: The deadline passed, or the failures stopped the run.
        """
        loop = asyncio.get_running_loop()
        self._start = loop.time()
        self.derived = deadline_s is None
        self.deadline_s = deadline_s
        timeout = asyncio.timeout_at(None if deadline_s is None else self._start + deadline_s)
        try:
            async with timeout:
                self._timeout = timeout
                yield self
        except TimeoutError:
            if not timeout.expired():
                raise  # a TimeoutError of the body's own, not the guard's
            raise BenchStopped(self.reason or self._deadline_reason()) from None
        finally:
            self._timeout = None

    def _deadline_reason(self) -> str:
        origin = "derived from the workload" if self.derived else "as set"
        failures = "; ".join(f"{n} x {kind}" for kind, n in self.kinds.most_common(3))
        return (
            f"stopped at the run's deadline of {self.deadline_s or 0:.0f} s ({origin}): "
            f"{self.ended} requests had ended, {self.failed} of them failed"
            + (f" ({failures})" if failures else "")
        )
