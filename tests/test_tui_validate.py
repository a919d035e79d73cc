"""``v`` in the TUI: the installed vLLM's own validation joins the findings (issue 27).

The same call as ``tunelab check --validate`` (tuner.lab.checks.ask_vllm: the real
vLLM CPU build in a subprocess, no engine). Asserted against the core: the
findings the screen holds and draws are the rules' findings plus vLLM's verdict
for this config; a changed config drops the verdict; a previewed node is not
validated by the vLLM installed here.
"""

from __future__ import annotations

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import KnobChanged
from tui.widgets.findings_panel import FindingsPanel
from tuner.lab import checks
from tuner.lab.target import preview

SAID = "max_num_batched_tokens (16) must be greater than or equal to max_num_seqs (64)."


async def test_v_asks_vllm_and_its_refusal_joins_the_findings_until_the_config_changes() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        session = app.session
        app.main.post_message(KnobChanged("max-num-batched-tokens", 16))  # below max-num-seqs 64
        await wait_for(pilot, lambda: session.config.engine.get("max-num-batched-tokens") == 16)
        await pilot.press("v")
        await wait_for(
            pilot, lambda: session.verdict is not None, timeout=240, what="vLLM's answer"
        )
        verdict = session.verdict
        assert verdict is not None and verdict.config == session.config
        ours = [f for f in session.findings if f.rule == "vllm-validation"]
        assert ours and SAID in ours[0].message
        rules = checks.findings(
            session.config, session.model_info, session.rules_target, session.workload
        )
        assert session.findings == checks.with_verdict(rules, verdict, session.config)
        assert SAID[:40] in str(app.main.query_one(FindingsPanel).render())

        app.main.post_message(KnobChanged("max-num-batched-tokens", 128))
        await wait_for(pilot, lambda: session.config.engine.get("max-num-batched-tokens") == 128)
        await pilot.pause()
        assert not [f for f in session.findings if f.rule == "vllm-validation"]


async def test_a_previewed_node_is_not_validated_by_the_vllm_installed_here() -> None:
    app = TunelabApp(services=services(), preview=preview("MI300X"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        notes: list[str] = []
        app.notify = lambda message, **_k: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.press("v")
        await pilot.pause()
        assert app.session.verdict is None
        assert any("press g" in n for n in notes), notes
