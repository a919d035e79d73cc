"""One reading of an on/off word (issue 28: four boolean parsers disagreed).

A switch knob's ``--set`` text, the faces' boolean fields, the environment
policy's check of a switch variable and the hub's offline variables all read
tuner.switches: a word one of them takes as on (or off) is read the same by
every other, and a word none takes is refused by each.
"""

from __future__ import annotations

import pytest

from tuner import knobs
from tuner.knobs import ConfigError
from tuner.lab.values import ValueTextError, parse_bool
from tuner.model.source import hub_offline
from tuner.policy.consent import Consent
from tuner.policy.env_vars import check

WORDS = ["1", "0", "true", "FALSE", " yes ", "No", "on", "OFF", "y", "t", "2", "maybe", ""]
SWITCH_KNOB = "VLLM_ROCM_USE_AITER"


def _knob(word: str) -> bool | None:
    try:
        return bool(knobs.coerce(SWITCH_KNOB, word))
    except ConfigError:
        return None


def _field(word: str) -> bool | None:
    try:
        return parse_bool(word)
    except ValueTextError:
        return None


@pytest.mark.parametrize("word", WORDS)
def test_every_reader_of_a_switch_takes_the_same_words(
    word: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _knob(word)
    assert _field(word) is state
    # The environment policy accepts exactly the words the knob takes, for a switch variable.
    refused = check("NCCL_P2P_DISABLE", word, Consent()) is not None
    assert refused is (state is None)
    monkeypatch.setenv("HF_HUB_OFFLINE", word)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert hub_offline() is (state is True)


def test_the_words_are_the_documented_ones() -> None:
    on = [w for w in WORDS if _knob(w) is True]
    off = [w for w in WORDS if _knob(w) is False]
    assert on == ["1", "true", " yes ", "on"]
    assert off == ["0", "FALSE", "No", "OFF"]
