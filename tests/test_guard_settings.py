"""Guard settings: the user's probe prompts, token count and thresholds, checked and carried to the runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_guard import BASE, _probe, _run
from tests.test_trials_runner import CPU, REPO, double, trial
from tuner.errors import TunelabError
from tuner.guard import (
    BUILTIN_PROBES,
    DEFAULT_GUARD_TOKENS,
    GuardRun,
    GuardSettings,
    GuardSettingsError,
    Thresholds,
    Verdict,
    load_prompts,
)
from tuner.lab import run as lab_run
from tuner.trials.guard_check import trial_verdict
from tuner.trials.model import TrialStatus
from tuner.trials.runner import run_trial
from tuner.trials.store import TrialStore


def test_defaults_are_the_builtin_probes() -> None:
    s = GuardSettings()
    assert s.enabled and s.probes == BUILTIN_PROBES and s.tokens == DEFAULT_GUARD_TOKENS
    assert s.thresholds == Thresholds()


def test_prompts_one_per_line_or_a_json_list(tmp_path: Path) -> None:
    lines = tmp_path / "p.txt"
    lines.write_text('first prompt\n\n  \nsecond: {"x": 1}\n', encoding="utf-8")
    assert load_prompts(lines) == ("first prompt", 'second: {"x": 1}')
    js = tmp_path / "p.json"
    js.write_text(json.dumps(["multi\nline", "two"]), encoding="utf-8")
    assert GuardSettings(prompts_file=js, tokens=4).probes == ("multi\nline", "two")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("", "holds no prompt"),
        ("\n  \n", "holds no prompt"),
        ("[1, 2]", "only strings"),
        ('["a", ', "not valid JSON"),
        ('["a", " "]', "prompt 2 of the JSON list is empty"),
        ("a\nb\na\n", "prompt 3 repeats prompt 1"),
        ("x" * 9000, "characters"),
    ],
)
def test_a_bad_prompts_file_is_a_user_error_with_a_fix(
    tmp_path: Path, content: str, words: str
) -> None:
    path = tmp_path / "p.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(GuardSettingsError) as err:
        GuardSettings(prompts_file=path)
    assert words in str(err.value) and str(path) in str(err.value)
    assert (
        isinstance(err.value, TunelabError)
        and err.value.fix
        and "one prompt per line" in (err.value.fix)
    )


def test_missing_or_binary_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(GuardSettingsError, match="cannot read guard prompts file"):
        GuardSettings(prompts_file=tmp_path / "nope.txt")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(GuardSettingsError, match="not UTF-8"):
        load_prompts(binary)


@pytest.mark.parametrize("tokens", [0, -3, 257, True, 2.5])
def test_token_count_out_of_range_is_refused(tokens: object) -> None:
    with pytest.raises(GuardSettingsError, match="--guard-tokens") as err:
        GuardSettings(tokens=tokens)  # type: ignore[arg-type]
    assert err.value.fix


@pytest.mark.parametrize(
    "th",
    [Thresholds(max_diverged_fraction=1.5), Thresholds(max_mean_abs_dlogprob=float("nan"))],
)
def test_meaningless_thresholds_are_refused(th: Thresholds) -> None:
    with pytest.raises(GuardSettingsError, match="guard threshold"):
        GuardSettings(thresholds=th)


def test_the_lab_builds_settings_and_hands_them_to_the_trial_runner(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("one\ntwo\n", encoding="utf-8")
    settings = lab_run.guard_settings(path, 5)
    assert settings.probes == ("one", "two") and settings.tokens == 5
    assert lab_run.guard_settings().probes == BUILTIN_PROBES
    with pytest.raises(GuardSettingsError):
        lab_run.guard_settings(tmp_path / "missing")
    with TrialStore(tmp_path / "t.db") as store:
        runner = lab_run.runner(store, lab_run.RunOptions(guard=settings), lambda e: None)
        assert runner.options["guard"] is settings


async def test_runner_asks_the_settings_probes_and_records_the_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("alpha\nbeta\n", encoding="utf-8")
    th = Thresholds(max_diverged_fraction=0.5, max_mean_abs_dlogprob=0.2)
    settings = GuardSettings(prompts_file=path, tokens=3, thresholds=th)
    store = TrialStore(tmp_path / "t.db")
    done = await run_trial(
        trial(num_prompts=4),
        store,
        context=CPU,
        engine_command=double(),
        engine_cwd=str(REPO),
        guard=settings,
    )
    assert done.status is TrialStatus.DONE
    run = GuardRun.from_dict(store.get(done.id).guard)
    # The double answers SSE where the guard wants JSON: the run fails at probe 1 of 2
    # (the settings' probe count), with the settings' tokens and thresholds recorded.
    assert run.max_tokens == 3 and run.thresholds == th
    assert "probe 1/2" in (run.error or "")
    off = await run_trial(
        trial(num_prompts=4),
        store,
        context=CPU,
        engine_command=double(),
        engine_cwd=str(REPO),
        guard=GuardSettings.off(),
    )
    assert off.guard is None and "guard_s" not in off.timings


def test_a_trial_is_judged_by_the_thresholds_it_was_run_with(tmp_path: Path) -> None:
    # One of two prompts diverges: drifted by default, close under max_diverged_fraction=0.5.
    cand = _run(_probe("a", [5, 6, 99, 98], [-0.1, -0.2, -0.3, -0.4]), BASE.probes[1])
    with TrialStore(tmp_path / "t.db") as store:
        base_t, cand_t = trial(), trial()
        base_t.guard = BASE.to_dict()
        cand.thresholds = Thresholds(max_diverged_fraction=0.5)
        cand_t.guard = cand.to_dict()
        for t in (base_t, cand_t):
            store.add(t)
        v = trial_verdict(base_t, cand_t)
        assert v is not None and v.verdict is Verdict.CLOSE
        strict = trial_verdict(base_t, cand_t, Thresholds())
        assert strict is not None and strict.verdict is Verdict.DRIFTED
