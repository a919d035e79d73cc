"""Every face that turns a config into an engine meets the same policy, from one corpus.

For each setting of ``tests/support/policy_corpus.py`` (loaders, compiler flags, shells,
plugins, code-loading arguments and nested fields, secrets) and each entry point — ``run``,
``ab``, ``sweep``, ``tune``, ``capacity``, ``ablate``, ``presets verify``, ``jobs run-spec``
and the TUI — the command must refuse before any engine is launched: exit 2 with tunelab's
own message naming the setting, no traceback, no secret echoed, no launch attempt carrying it
(:class:`StartSpy` records every launch). With the consent that lifts it (``--allow-env NAME``
or ``--allow-code``), the setting must reach the launch: the consent travels from the face to
the engine's own gate. A test also checks that every command with ``--allow-code`` is driven
here, so a new entry point cannot skip the corpus.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
import typer
from click.testing import CliRunner

from tests.support.policy_corpus import CANARY, Setting, StartSpy, corpus, preset_text
from tuner import policy
from tuner.cli.app import register_all
from tuner.config import EngineConfig
from tuner.crash import run_guarded

APP = register_all(typer.Typer())
CASES = {s.name: s for s in corpus()}
BASE = [
    "--model",
    "engine-double",
    "--input-len",
    "8",
    "--output-len",
    "8",
    "--num-prompts",
    "2",
    "--warmup",
    "0",
    "--no-guard",
]
WORKLOAD = {"input_len": 8, "output_len": 8, "num_prompts": 2, "warmup_requests": 0}
RESULTS = {
    "objective": "output_throughput",
    "output_throughput": 100.0,
    "noise": {"repeats": 3, "mean": 100.0, "stdev": 5.0},
}

Driver = Callable[[Setting, Path, list[str]], list[str]]


def _run(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    return ["run", *BASE, "--set", setting.item(), *flags]


def _ab(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    return [
        "ab",
        *BASE,
        "--a-set",
        "max-num-seqs=2",
        "--b-set",
        setting.item(),
        "--repeats",
        "2",
        *flags,
    ]


def _sweep(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    if setting.scalar:  # the swept values themselves carry it
        return ["sweep", f"{setting.key}={setting.values()}", *BASE, *flags]
    return ["sweep", "max-num-seqs=2,4", *BASE, "--set", setting.item(), *flags]


def _tune(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    url = f"sqlite:///{tmp / 'optuna.db'}"
    space = f"{setting.key}={setting.values()}" if setting.scalar else "max-num-seqs=2,4"
    extra = [] if setting.scalar else ["--set", setting.item()]
    return ["tune", *BASE, "--param", space, *extra, "--trials", "1", "--storage", url, *flags]


def _capacity(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    args = [
        "capacity",
        "--slo",
        "p99_ttft_ms<=500",
        *BASE[:-1],
        "--launches",
        "1",
        "--probes",
        "2",
        "--max",
        "4",
    ]
    if setting.scalar and not isinstance(setting.value, bool):
        return [*args, "--sweep", f"{setting.key}={setting.values()}", *flags]
    return [*args, "--b-set", setting.item(), *flags]


def _verify(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    path = tmp / "hostile.toml"
    path.write_text(preset_text(setting, workload=WORKLOAD, results=RESULTS))
    return ["presets", "verify", str(path), "--repeats", "2", *flags]


def _run_spec(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    from tuner.bench.workload import Workload
    from tuner.lab.job_spec import ABJobSpec

    env: dict[str, str] = {}
    engine: dict[str, Any] = {"max-num-seqs": 2}
    setting.apply(env, engine)
    spec = ABJobSpec(
        study="policy",
        store_path=str(tmp / "store.db"),
        a=EngineConfig("engine-double", engine={"max-num-seqs": 2}),
        b=EngineConfig("engine-double", env=env, engine=engine),
        workload=Workload.from_dict(WORKLOAD),
        repeats=2,
        startup_timeout=5.0,
    )
    return ["jobs", "run-spec", str(spec.write(tmp / "specs")), *flags]


def _ablate(setting: Setting, tmp: Path, flags: list[str]) -> list[str]:
    from tuner.bench.workload import Workload
    from tuner.trials.model import Trial, TrialStatus
    from tuner.trials.store import TrialStore

    env: dict[str, str] = {}
    engine: dict[str, Any] = {"max-num-seqs": 4}
    setting.apply(env, engine)
    db = tmp / "store.db"
    with policy.granting(policy.Consent(code=True, env=frozenset({setting.key}))):
        store = TrialStore(db)  # a store someone else filled: its rows are input
        trials = [
            Trial(
                config=EngineConfig("engine-double", engine={"max-num-seqs": 2}),
                workload=Workload.from_dict(WORKLOAD),
                study="s",
            ),
            Trial(
                config=EngineConfig("engine-double", env=env, engine=engine),
                workload=Workload.from_dict(WORKLOAD),
                study="s",
            ),
        ]
        for trial in trials:
            store.add(trial)
            store.update_status(trial, TrialStatus.DONE, results={"output_throughput": 100.0})
        store.close()
    return [
        "ablate",
        trials[1].id,
        "--baseline",
        trials[0].id,
        "--repeats",
        "2",
        "--store",
        str(db),
        "--no-confirm",
        *flags,
    ]


DRIVERS: dict[str, Driver] = {
    "run": _run,
    "ab": _ab,
    "sweep": _sweep,
    "tune": _tune,
    "capacity": _capacity,
    "presets verify": _verify,
    "jobs run-spec": _run_spec,
    "ablate": _ablate,
}
STORED = {"run", "ab", "sweep", "capacity"}  # take --store; the rest set theirs up


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def tunelab(args: tuple[str, ...]) -> None:
    """The console script as users run it: the CLI under tuner.crash's top-level handler."""
    code = run_guarded(lambda: APP(args=list(args), prog_name="tunelab"), list(args))
    sys.exit(code)


def _invoke(args: list[str], tmp: Path, store: bool) -> Any:
    if store and "--store" not in args:
        args = [*args, "--store", str(tmp / "store.db")]
    env = {"HF_TOKEN": "", "COLUMNS": "200"}
    return CliRunner().invoke(tunelab, args, env=env)


def _judge_refused(setting: Setting, result: Any, spy: StartSpy, home: Path) -> None:
    out = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code == 2, out[-800:]
    assert "Traceback" not in out
    assert setting.mentions in out, out[-800:]
    assert not spy.saw(setting), "an engine launch carried the refused setting"
    assert CANARY not in out
    for path in home.rglob("*"):
        if path.is_file() and path.suffix in (".db", ".json", ".jsonl", ".txt", ".log"):
            assert CANARY.encode() not in path.read_bytes(), path
    assert not list(home.rglob("crash-*.txt")), "a crash report was written"


@pytest.mark.parametrize("entry", list(DRIVERS))
def test_every_entry_point_refuses_every_setting(
    entry: str, tmp_path: Path, tunelab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = StartSpy().install(monkeypatch)
    for name, setting in CASES.items():
        work = tmp_path / name
        work.mkdir()
        args = DRIVERS[entry](setting, work, [])
        with policy.granting(policy.Consent()):
            result = _invoke(args, work, entry in STORED)
        try:
            _judge_refused(setting, result, spy, tunelab_home)
        except AssertionError as exc:
            raise AssertionError(f"{entry} / {name}: {exc}") from None


@pytest.mark.parametrize("entry", list(DRIVERS))
@pytest.mark.parametrize("name", ["ld-preload", "inductor-compile-config"])
def test_consent_reaches_the_engine_through_every_entry_point(
    entry: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setting = CASES[name]
    spy = StartSpy().install(monkeypatch)
    with policy.granting(policy.Consent()):
        result = _invoke(
            DRIVERS[entry](setting, tmp_path, list(setting.flags)), tmp_path, entry in STORED
        )
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {type(result.exception).__name__}: {result.exception}"
    )
    assert spy.saw(setting), (
        f"{entry}: the consented setting never reached a launch\n" + (result.output[-1500:])
    )


def test_secrets_are_refused_whatever_the_consent(tmp_path: Path) -> None:
    for name in ("secret-env", "nested-secret"):
        setting = CASES[name]
        env: dict[str, str] = {}
        engine: dict[str, Any] = {}
        setting.apply(env, engine)
        everything = policy.Consent(code=True, env=frozenset({setting.key}))
        found = policy.violations(EngineConfig("m", env=env, engine=engine), everything)
        assert [v.kind for v in found] == ["secret"], name


async def test_the_engine_itself_refuses_what_no_face_checked(tmp_path: Path) -> None:
    """The last gate: an Engine built directly (no face, no rules) launches nothing refused."""
    from tuner.engine import Engine, EngineSpec
    from tuner.engine.server import EngineStartError

    for setting in CASES.values():
        env: dict[str, str] = {}
        engine: dict[str, Any] = {}
        setting.apply(env, engine)
        spec = EngineSpec(
            EngineConfig("m", env=env, engine=engine),
            tmp_path / "log",
            command=["sh", "-c", "touch PWNED"],
            cwd=tmp_path,
        )
        with policy.granting(policy.Consent()), pytest.raises(EngineStartError) as info:
            await Engine(spec).start()
        assert "policy" in info.value.reason and setting.mentions in info.value.reason
    assert not (tmp_path / "PWNED").exists()


async def test_tui_refuses_each_setting_in_a_preset(tmp_path: Path) -> None:
    """The TUI's start-up config (tui.app load_start_config) meets the same policy.

    One app; each preset goes through the worker that loads ``--preset`` at start-up.
    """
    from textual.message import Message

    from tests.support.tui_harness import services, wait_for
    from tui.app import TunelabApp
    from tui.messages import ConfigLoaded

    seen: list[Message] = []

    def loads() -> list[ConfigLoaded]:
        return [m for m in seen if isinstance(m, ConfigLoaded)]

    with policy.granting(policy.Consent()):
        app = TunelabApp(preset=None, services=services())
        async with app.run_test(size=(100, 30), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: len(loads()) == 1, 30, "the start-up config")
            for count, setting in enumerate(CASES.values(), start=2):
                path = tmp_path / f"{setting.name}.toml"
                path.write_text(preset_text(setting, model="org/model"))
                app.load_start_config(None, path)
                await wait_for(pilot, lambda n=count: len(loads()) == n, 30, setting.name)
                loaded = loads()[-1]
                assert loaded.config is None, setting.name
                assert loaded.error and setting.mentions in loaded.error, (
                    setting.name,
                    loaded.error,
                )
                assert CANARY not in loaded.error


def test_tui_findings_block_run_for_each_setting() -> None:
    """A config the TUI holds (however it got there) shows the refusal and blocks Run."""
    from tuner.lab import checks
    from tuner.rules import Target

    for setting in CASES.values():
        env: dict[str, str] = {}
        engine: dict[str, Any] = {}
        setting.apply(env, engine)
        with policy.granting(policy.Consent()):
            found = checks.findings(EngineConfig("m", env=env, engine=engine), None, Target(), None)
        assert checks.blocks_run(found), setting.name
        refusal = [f for f in found if f.rule == "policy"]
        assert refusal and setting.mentions in refusal[0].message, setting.name
        assert CANARY not in json.dumps([f.to_dict() for f in found])


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf command of the console script, lazy groups resolved (tuner.cli.app).

    Typer's groups are its own click's, so they are told by what they do, not their class.
    """
    ctx = type(group).context_class(group)
    out: dict[str, Any] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if hasattr(command, "list_commands"):
            out.update(_commands(command, f"{prefix}{name} "))
        elif command is not None:
            out[f"{prefix}{name}"] = command
    return out


def test_every_command_that_takes_consent_is_driven_here() -> None:
    """A new command that starts engines declares --allow-code/--allow-env and joins DRIVERS."""
    from tui.cli import app as console

    commands = _commands(typer.main.get_group(console))
    with_consent = {
        name
        for name, command in commands.items()
        if any("--allow-code" in p.opts for p in command.params)
    }
    for name in {*DRIVERS, "tui"}:
        opts = {o for p in commands[name].params for o in p.opts}
        assert {"--allow-code", "--allow-env"} <= opts, name
    # Commands that take consent without starting engines (they check or write files).
    no_engine = {"check", "export", "presets check", "presets show", "tui"}
    assert with_consent - no_engine == set(DRIVERS), with_consent ^ set(DRIVERS)
