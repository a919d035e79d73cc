"""The one reading of an on/off word in tunelab.

A switch knob's text (``--set enable-prefix-caching=yes``, tuner.knobs), the
faces' boolean fields (tuner.lab.values.parse_bool) and the hub's offline
variables (``HF_HUB_OFFLINE=1``, tuner.model.source) read the same words here,
so a word one of them takes is never refused by another. It sits below every
layer (it imports nothing) so each of them can use it.
"""

from __future__ import annotations

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def switch_state(text: str) -> bool | None:
    """True or False for an on/off word (any case, spaces around ignored); None otherwise."""
    low = text.strip().lower()
    if low in TRUE_WORDS:
        return True
    if low in FALSE_WORDS:
        return False
    return None
