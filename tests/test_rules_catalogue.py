"""The rules read the knob catalogue itself, never a private fallback copy (issue 12).

The rules used to import ``tuner.knobs`` inside ``try/except ImportError`` and
fall back to their own guesses (no defaults, ``"MLA" in name``, an empty
CUDA-graph table). Those guards are gone: the catalogue is always importable,
and a broken one must fail loudly. Each test here changes one catalogue entry
(monkeypatch, undone afterwards) and checks that a rule's finding moves with
it, which a rule holding its own copy could not do.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import tuner.knobs as knobs
from tuner.config import EngineConfig
from tuner.knobs import value_sets
from tuner.rules import Finding, Severity, Target, check
from tuner.rules.aiter import _is_aiter_subflag
from tuner.rules.attention import UNIFIED_ENV
from tuner.rules.base import AITER, knob_default

MODEL = "org/model"


def _fired(rule_id: str, config: EngineConfig, target: Target) -> list[Finding]:
    return [f for f in check(config, None, target) if f.rule == rule_id]


def test_cudagraph_rule_reads_the_catalogue_support_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full graphs on ROCM_AITER_FA: the verdict follows CUDAGRAPH_SUPPORT as the catalogue has it."""
    config = EngineConfig(
        MODEL, engine={"attention-backend": "ROCM_AITER_FA", "cudagraph-mode": "FULL"}
    )
    target = Target("0.32.0", "rocm", 8, 192.0)

    monkeypatch.setitem(value_sets.CUDAGRAPH_SUPPORT, "ROCM_AITER_FA", "piecewise-only")
    refused = _fired("cudagraph-mode-vs-backend", config, target)
    assert [f.severity for f in refused] == [Severity.ERROR]
    assert refused[0].fix == {"cudagraph-mode": "PIECEWISE"}

    monkeypatch.setitem(value_sets.CUDAGRAPH_SUPPORT, "ROCM_AITER_FA", "full")
    assert _fired("cudagraph-mode-vs-backend", config, target) == []


def test_unified_attention_rule_reads_the_catalogue_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The release from which vLLM ignores the unified-attention switch is the catalogue's."""
    config = EngineConfig(MODEL, env={AITER: "1", UNIFIED_ENV: "1"})
    on_016 = Target("0.16.0", "rocm", 8, 192.0)
    knob = knobs.get(UNIFIED_ENV)
    assert knob is not None
    assert knob.extra["no_effect_since"] == "0.19.0"  # what the catalogue ships
    ignored = "no longer reads"
    before = _fired("aiter-unified-attention", config, on_016)
    assert not any(ignored in f.message for f in before)

    monkeypatch.setitem(knob.extra, "no_effect_since", "0.15.0")
    after = _fired("aiter-unified-attention", config, on_016)
    assert [f.severity for f in after] == [Severity.WARNING]
    assert ignored in after[0].message


def test_aiter_subflag_is_read_from_the_catalogue_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag is an AITER sub-flag when the catalogue names AITER as its parent."""
    key = "VLLM_ROCM_USE_SKINNY_GEMM"
    knob = knobs.get(key)
    assert knob is not None and knob.extra.get("parent") != AITER
    assert not _is_aiter_subflag(key)
    monkeypatch.setitem(knob.extra, "parent", AITER)
    assert _is_aiter_subflag(key)


def test_rule_defaults_are_the_catalogue_defaults() -> None:
    """Every default a rule falls back on is the catalogue's own value, knob by knob."""
    for key in knobs.keys():  # noqa: SIM118 (a module function, not dict.keys)
        knob = knobs.get(key)
        assert knob is not None
        assert knob_default(key) == knob.default, key
    assert knob_default("not-a-knob") is None


def test_rules_fail_loudly_when_the_catalogue_is_broken() -> None:
    """With the catalogue unimportable, importing the rules raises instead of degrading quietly."""
    code = (
        "import sys\n"
        "sys.modules['tuner.knobs.value_sets'] = None\n"
        "try:\n"
        "    import tuner.rules\n"
        "except ImportError as exc:\n"
        "    print('refused', exc.name)\n"
        "else:\n"
        "    print('imported')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "refused tuner.knobs.value_sets"


def test_no_rule_looks_the_catalogue_up_late_with_a_fallback() -> None:
    """Once imported, the rules hold the catalogue: blocking it later changes no finding.

    A rule that still imported ``tuner.knobs`` at call time inside
    ``try/except ImportError`` would switch to its fallback here (an empty
    CUDA-graph table, no defaults) and its findings would change.
    """
    code = (
        "import sys\n"
        "from tuner.config import EngineConfig\n"
        "from tuner.rules import Target, check\n"
        "cases = [\n"
        "    EngineConfig('org/m', env={'VLLM_ROCM_USE_AITER': '1',\n"
        "        'VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION': '1', 'VLLM_NOT_A_KNOB': '1'},\n"
        "        engine={'attention-backend': 'ROCM_ATTN', 'cudagraph-mode': 'FULL',\n"
        "                'all2all-backend': 'deepep_low_latency', 'kv-cache-dtype': 'fp8_e5m2'}),\n"
        "    EngineConfig('org/m', env={'VLLM_ROCM_USE_AITER_MHA': '1'},\n"
        "        engine={'attention-backend': 'FLASHMLA', 'cudagraph-mode': 'FULL_AND_PIECEWISE'}),\n"
        "]\n"
        "targets = [Target('0.32.0', 'rocm', 8, 192.0, env_vars=('VLLM_ROCM_USE_AITER',)),\n"
        "           Target('0.12.0', 'cuda', 8, 80.0), Target('0.10.2', 'rocm', 8, 192.0)]\n"
        "def run():\n"
        "    return [(f.rule, f.severity, f.message) for c in cases for t in targets\n"
        "            for f in check(c, None, t)]\n"
        "before = run()\n"
        "for name in [m for m in sys.modules if m.startswith('tuner.knobs')]:\n"
        "    sys.modules[name] = None\n"
        "after = run()\n"
        "print(len(before), before == after)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, same = done.stdout.split()
    assert int(count) >= 8, done.stdout  # the cases do exercise the catalogue-reading rules
    assert same == "True", done.stdout
