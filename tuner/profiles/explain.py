"""Why B is faster: two arms' profiles set side by side per output token (issue 29).

Each arm's profile (:class:`tuner.profiles.trace.TraceProfile`) says how many
milliseconds per output token each family took in a steady window at the
workload's load. The difference of the arms, family by family, is what the
report shows. Given the arms' *measured* per-token times (``1000 / output
throughput``), each profile is scaled to its arm's measured time first: the
profiler slows every op it records, so a window of many small steps (one
request per step) runs up to 1.5x slower than the measured run it describes,
while a batched one barely slows (benchmarks/ab_profile.py). The profile gives
the *shares*, the measured run the *total*; the scale factors are kept and
shown, so an overhead that large is never hidden. ``other ops`` are measured
but explain nothing, so they, and whatever the families do not cover, stay
"unexplained".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.profiles.families import FAMILIES, LABELS, OTHER
from tuner.profiles.trace import TraceProfile


@dataclass(frozen=True)
class FamilyDelta:
    """One family's milliseconds per output token in each arm, and per step."""

    family: str
    a_ms: float
    b_ms: float
    a_step_ms: float
    b_step_ms: float

    @property
    def delta_ms(self) -> float:
        """B − A per output token (negative: B spends less here)."""
        return self.b_ms - self.a_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "label": LABELS[self.family],
            "a_ms_per_token": self.a_ms,
            "b_ms_per_token": self.b_ms,
            "delta_ms_per_token": self.delta_ms,
            "a_ms_per_step": self.a_step_ms,
            "b_ms_per_step": self.b_step_ms,
        }


@dataclass(frozen=True)
class Explanation:
    """The arms' difference per output token, by family, with what stays unexplained.

    Attributes:
        rows: One per family, the largest |Δ| first.
        total_ms: The difference to explain, B − A per output token.
        measured: ``total_ms`` is the A/B's measured difference (else the profiles').
        scale: Each arm's measured ms per token over its profile window's (None
            without measured figures): the rows are the profiles times these.
    """

    rows: list[FamilyDelta]
    total_ms: float
    measured: bool
    scale: tuple[float, float] | None = None

    @property
    def explained_ms(self) -> float:
        """The part of ``total_ms`` that named families account for."""
        return sum(r.delta_ms for r in self.rows if r.family != OTHER)

    @property
    def unexplained_ms(self) -> float:
        return self.total_ms - self.explained_ms

    @property
    def explained_share(self) -> float | None:
        """``explained_ms / total_ms`` (None when the arms do not differ)."""
        return self.explained_ms / self.total_ms if self.total_ms else None

    def summary(self) -> str:
        """``B − A: −1.73 ms per output token; gaps between steps −1.10, host −0.41 ...
        (94 % explained)``."""
        share = self.explained_share
        lead = [r for r in self.rows if r.family != OTHER][:3]
        parts = ", ".join(f"{LABELS[r.family]} {r.delta_ms:+.3f}" for r in lead)
        told = f" ({share:.0%} explained by families)" if share is not None else ""
        basis = "measured" if self.measured else "in the profiles"
        text = f"B − A {basis}: {self.total_ms:+.3f} ms per output token; {parts}{told}"
        if self.scale is not None and any(abs(x - 1.0) > 0.1 for x in self.scale):
            text += (
                f"; profiles scaled to the measured runs (A ×{self.scale[0]:.2f}, "
                f"B ×{self.scale[1]:.2f}: profiler overhead and host noise differ between "
                "window and run)"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "total_ms_per_token": self.total_ms,
            "measured": self.measured,
            "scale": list(self.scale) if self.scale is not None else None,
            "explained_ms_per_token": self.explained_ms,
            "unexplained_ms_per_token": self.unexplained_ms,
            "explained_share": self.explained_share,
            "summary": self.summary(),
        }


def explain(
    a: TraceProfile,
    b: TraceProfile,
    measured_ms: tuple[float, float] | None = None,
) -> Explanation:
    """Attributes B − A per output token to families.

    Args:
        a, b: Each arm's profile.
        measured_ms: The A/B's measured milliseconds per output token of A and B
            (``1e3 / output_throughput``): each profile is scaled to its arm's
            figure; None: the profiles' own windows, unscaled.
    """
    sa = sb = 1.0
    if measured_ms is not None and a.ms_per_token and b.ms_per_token:
        sa, sb = measured_ms[0] / a.ms_per_token, measured_ms[1] / b.ms_per_token
    rows = [
        FamilyDelta(
            f,
            sa * (a.per_token_ms(f) or 0.0),
            sb * (b.per_token_ms(f) or 0.0),
            sa * (a.per_step_ms(f) or 0.0),
            sb * (b.per_step_ms(f) or 0.0),
        )
        for f in FAMILIES
    ]
    rows.sort(key=lambda r: -abs(r.delta_ms))
    if measured_ms is not None:
        total = measured_ms[1] - measured_ms[0]
        return Explanation(rows, total, True, (sa, sb))
    return Explanation(rows, (b.ms_per_token or 0.0) - (a.ms_per_token or 0.0), False)
