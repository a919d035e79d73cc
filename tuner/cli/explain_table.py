"""The table of an explanation by kernel family, as every CLI command prints it (issue 29).

``tunelab profile`` and ``tunelab ab --profile`` (and ``ab --report``) print the
same table; it lives outside both command modules so that loading one command
never loads another (tuner.cli.app's lazy command table).
"""

from __future__ import annotations

from rich.table import Table

from tuner.profiles.explain import Explanation
from tuner.profiles.families import LABELS


def explanation_table(found: Explanation) -> Table:
    """Each family's ms per output token (per step) in A and B and B − A, unexplained last;
    ``tunelab profile`` and ``tunelab ab --profile`` print the same table."""
    table = Table(title="ms per output token (per step), by kernel family", title_justify="left")
    for column in ("family", "A", "B", "B − A"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for r in found.rows:
        if not (r.a_ms or r.b_ms):
            continue
        table.add_row(
            LABELS[r.family],
            f"{r.a_ms:.3f} ({r.a_step_ms:.2f})",
            f"{r.b_ms:.3f} ({r.b_step_ms:.2f})",
            f"{r.delta_ms:+.3f}",
        )
    table.add_row(
        "unexplained (other ops incl.)", "", "", f"{found.unexplained_ms:+.3f}", style="dim"
    )
    return table
