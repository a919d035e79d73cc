"""The policy's refusals as findings, so every face shows them where it shows the rules.

:mod:`tuner.policy` decides what a config may make an engine do; this theme only renders its
refusals as error findings (they block a run exactly as the engine's own gate would), with a
fix that removes the refused setting: the whole variable or argument, or for a field inside a
JSON value just that field. The consent is this process's (``--allow-code``/``--allow-env``
given to the command or the TUI).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from tuner import policy
from tuner.rules.base import Context, rule
from tuner.rules.types import Finding, Severity

SOURCE = "tunelab's policy: a config is plain data unless you consent (docs/reliability.md)"
RULE_ID = "policy"


@rule(RULE_ID)
def refusals(ctx: Context) -> Iterator[Finding]:
    """One error per refused setting (secrets, code, variables not known to be data)."""
    for found in policy.violations(ctx.config):
        yield Finding(
            Severity.ERROR,
            (found.knob,),
            f"{found.message}. Fix: {found.fix}",
            SOURCE,
            {found.knob: _without(ctx.config.get(found.knob), found.key)},
            RULE_ID,
        )


def _without(value: Any, key: str) -> Any:
    """``value`` with the nested field ``key`` (``knob.a.b``) removed; None removes the knob."""
    parts = key.split(".")[1:]
    if not parts or not isinstance(value, dict):
        return None
    trimmed = copy.deepcopy(value)
    node: Any = trimmed
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    if not isinstance(node, dict) or parts[-1] not in node:
        return None
    del node[parts[-1]]
    return trimmed or None
