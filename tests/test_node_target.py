"""One target for every face (issue 28): the TUI, a trial and ``check`` judge a node alike.

The node is an 8×MI300X in CPX partitions, read through the amdsmi backend over
the FAKE amdsmi module (recorded MI300X responses, the partition set to CPX;
no GPU exists on this machine). The TUI builds its target from its own
sampler's first snapshot; the trial runner (``tunelab run``, ``ab`` ...) and
``tunelab check`` read the node through tuner.rules.node_target. All three
must be the same target, so the same config gets the same findings — the
CPX tensor-parallel warning among them — whichever face asks.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import fake_amdsmi
from tuner.config import EngineConfig
from tuner.introspect import introspect
from tuner.lab import target as lab_target
from tuner.rules import WorkloadShape, check
from tuner.rules import node_target as node_target_module
from tuner.rules.node_target import NodeGpus, read_backend, with_node_gpus
from tuner.telemetry.amd import AmdSmiBackend
from tuner.trials import context as trial_context
from tuner.trials import slots

MODEL = str(
    Path(__file__).parent / "data" / "hf-configs" / "meta-llama__Llama-3.1-70B-Instruct.json"
)


class CpxNode(AmdSmiBackend):
    """The recorded MI300X node with every GPU reporting the CPX compute partition."""

    def snapshot(self, index: int) -> Any:
        return replace(super().snapshot(index), compute_partition="CPX")


def _cpx_backend() -> CpxNode:
    backend = CpxNode(fake_amdsmi.make_module("mi300x"))
    backend.open()
    return backend


@pytest.fixture
def cpx_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(slots.FORCE_ENV, raising=False)
    for module in (node_target_module, slots):
        monkeypatch.setattr(module, "select_backend", lambda choice="auto": _cpx_backend())


def _tui_target() -> Any:
    """What tui/app.py's open_telemetry and MainScreen._with_gpus compute."""
    backend = _cpx_backend()
    first = backend.snapshot(0)
    info = introspect()
    return lab_target.with_node_gpus(
        lab_target.from_introspection(info),
        backend.count(),
        first.vram_total / 1024**3 if first.vram_total else None,
        first.name,
        first.compute_partition,
    )


def _rules(target: Any) -> set[str]:
    config = EngineConfig(model=MODEL, engine={"tensor-parallel-size": 2})
    info = trial_context.analyze_model(MODEL)
    assert info is not None
    return {f.rule for f in check(config, info, target, WorkloadShape())}


def test_the_tui_a_trial_and_check_build_the_same_target(cpx_node: None) -> None:
    tui = _tui_target()
    trial = trial_context.resolve_context(MODEL, refresh=True).target
    checked, _notes = lab_target.for_check(None, None, None, None)
    assert tui == trial == checked, (tui, trial, checked)
    assert tui.gpus == 8 and tui.partition == "CPX" and tui.gpu_name == "MI300X"
    # The same config, the same findings, whichever face asks.
    assert _rules(tui) == _rules(trial) == _rules(checked)
    assert "cpx-partition-tensor-parallel" in _rules(trial)


def test_what_the_user_typed_still_wins_over_the_node(cpx_node: None) -> None:
    given, _ = lab_target.for_check("0.32.0", "rocm", 4, 48.0)
    assert (given.gpus, given.vram_gib, given.note) == (4, 48.0, lab_target.GIVEN_NOTE)
    assert with_node_gpus(given, read_backend(_cpx_backend())) == given
    typed, _ = lab_target.for_check(None, None, 2, None)
    assert typed.gpus == 2 and typed.partition == "CPX"  # the node, with the typed count


def test_a_failing_driver_reads_as_no_gpu() -> None:
    class Broken(CpxNode):
        def count(self) -> int:
            raise RuntimeError("amdsmi: the driver went away")

    backend = Broken(fake_amdsmi.make_module("mi300x"))
    assert read_backend(backend) == NodeGpus()
    assert read_backend(backend, 2) == NodeGpus(2)
