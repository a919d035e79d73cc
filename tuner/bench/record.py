"""What one request left behind: its timings, its token count, why it failed or was flagged.

Plain data shared by the streaming client (which fills records), the SSE
accounting (tuner.bench.sse, which decides what counts as a token), the
metrics and the progress reporter (which read them). Kept apart from the
client so those readers need no HTTP stack.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field


@dataclass(slots=True)
class LiveCounters:
    """Totals the progress reporter reads while requests stream.

    Attributes:
        chunks: Token chunks received.
        tokens: Output tokens: one a chunk while a request streams, settled to its
            counted tokens (tuner.bench.sse.finish_record) when it ends, so the live
            tokens/s and the result's output throughput count the same thing.
        done: Counted requests finished.
        failed: Of those, failed.
    """

    chunks: int = 0
    tokens: int = 0
    done: int = 0
    failed: int = 0


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request, in perf_counter seconds.

    Attributes:
        prompt_len: Prompt tokens (the usage report wins over the estimate).
        expected_output_len: max_tokens sent.
        arrival: When the schedule released the request (before any wait for
            a concurrency slot).
        start: When the HTTP request was sent.
        chunk_times: Arrival time of every token chunk kept (tuner.bench.sse
            decides what a token chunk is and leaves a flood's padding out).
        output_tokens: Output tokens counted (tuner.bench.sse: the server's
            usage when believable, else the token chunks; 0 if unknown).
        end: When the stream finished or broke (and, while it streams, when
            it last made progress, for the stall watchdog).
        error_kind: Short failure class for counting ("" on success).
        error: Failure detail.
        usage_ignored: Why the server's usage count was not believed ("" if it was).
        notes: Odd things about the answer that were left out of the counts,
            kind -> detail (e.g. "empty chunks": padding chunks not counted).
        session: A conversation's number (tuner.bench.sessions), else -1.
        turn: Its turn, from 1, else -1.
        answer: The answer's text, kept only for a conversation's next turn.
    """

    prompt_len: int
    expected_output_len: int
    arrival: float = 0.0
    start: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    end: float = 0.0
    error_kind: str = ""
    error: str = ""
    usage_ignored: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    session: int = -1
    turn: int = -1
    answer: str = field(default="", repr=False)

    @property
    def success(self) -> bool:
        """True when the stream completed and carried at least one token."""
        return not self.error_kind

    @property
    def ttft(self) -> float:
        """Seconds from send to the first token chunk."""
        return self.chunk_times[0] - self.start if self.chunk_times else 0.0

    @property
    def latency(self) -> float:
        """Seconds from send to the last token chunk (vLLM's E2EL)."""
        return self.chunk_times[-1] - self.start if self.chunk_times else 0.0

    @property
    def itls(self) -> list[float]:
        """Gaps between consecutive token chunks, in seconds."""
        t = self.chunk_times
        return [b - a for a, b in itertools.pairwise(t)]

    @property
    def queue_time(self) -> float:
        """Seconds the request waited for a concurrency slot."""
        return self.start - self.arrival

    def fail(self, kind: str, message: str) -> None:
        """Mark the request failed unless an earlier failure already said why."""
        if not self.error_kind:
            self.error_kind = kind
            self.error = message
