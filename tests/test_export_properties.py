"""Property tests: export then import is lossless, and launch scripts cannot be injected.

Configs are generated from the knob catalogue (typed values for known knobs)
plus hostile strings (quotes, ``$()``, backticks, newlines, spaces, unicode)
wherever a string can go: the model, environment values, engine values the
catalogue does not type, and the compilation config. The launch script is
then run by bash for real, with a harmless stand-in ``vllm`` on PATH (a
Python script, named ``vllm``, that writes its argv and environment to a
file): it must receive exactly the intended argv and env, and nothing
injected may run (an injected ``touch PWNED`` would create a file).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuner.knobs as knobs
from tuner.config import EngineConfig, env_string
from tuner.export.preset import dump_preset, loads_preset, preset_from_config
from tuner.export.script import header_lines, render_script

FRAGMENTS = [
    "'",
    '"',
    "$(touch PWNED)",
    "`touch PWNED`",
    "${HOME}",
    "$HOME",
    "\n",
    "\r\n",
    "\t",
    " ",
    "\\",
    "\\'",
    "; touch PWNED",
    "&& touch PWNED",
    "| tee PWNED",
    "> PWNED",
    "--host",
    "-e",
    "*",
    "~",
    "!",
    "#",
    "é",
    "日本",
    "🚀",
    "\u2028",
    "=",
    "]]",
    '"""',
]
safe_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
hostile = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(safe_chars, max_size=8)), max_size=6
).map("".join)
non_blank = hostile.filter(lambda s: s.strip() != "" and not s.startswith("tunelab:"))
# A model starting with "-" is refused (vLLM would read it as an option).
model_names = non_blank.filter(lambda s: not s.startswith("-"))

ENV_KNOBS = [k for k in knobs.KNOBS if str(k.kind) == "env"]
ENGINE_KNOBS = [k for k in knobs.KNOBS if str(k.kind) == "engine"]
# Keys outside the catalogue pass through unchecked, so any text goes there
# (computed, because the catalogue grows: a key it learns gets typed values).
FREE_ENGINE_KEYS = [
    k
    for k in (
        "served-model-name",
        "chat-template",
        "download-dir",
        "tokenizer",
        "hf-overrides-text",
    )
    if knobs.get(k) is None
]
FREE_ENV_KEYS = [
    k
    for k in (
        "VLLM_SOME_FUTURE_FLAG",
        "NCCL_DEBUG",
        "OMP_NUM_THREADS",
        "RCCL_MSCCL_ENABLE",
        "HSA_NO_SCRATCH_RECLAIM",
    )
    if knobs.get(k) is None
]


# Free-text catalogue variables (CUDA_VISIBLE_DEVICES ...) get hostile text too, which the
# policy refuses for its shape without consent.
CONSENTED_ENV = (*FREE_ENV_KEYS, *(k.key for k in ENV_KNOBS if str(k.type) == "str"))


def typed_value(knob: knobs.Knob) -> st.SearchStrategy:
    kind = str(knob.type)
    if kind == "bool":
        return st.booleans()
    if kind == "int":
        low = int(knob.minimum) if knob.minimum is not None else 0
        high = int(knob.maximum) if knob.maximum is not None else 2**31
        return st.integers(low, high)
    if kind == "float":
        low = knob.minimum if knob.minimum is not None else 0.0
        high = knob.maximum if knob.maximum is not None else 1e6
        return st.floats(low, high, allow_nan=False, allow_infinity=False)
    if kind == "choice":
        return st.sampled_from(knobs.choices_for(knob))
    if kind == "json":
        leaf = st.one_of(hostile, st.integers(-(2**31), 2**31), st.booleans())
        return st.dictionaries(
            st.text(safe_chars, min_size=1, max_size=10),
            st.one_of(
                leaf, st.dictionaries(st.text(safe_chars, min_size=1, max_size=5), leaf, max_size=3)
            ),
            max_size=4,
        )
    return non_blank


@st.composite
def configs(draw: st.DrawFn) -> EngineConfig:
    env: dict[str, str] = {}
    for knob in draw(st.lists(st.sampled_from(ENV_KNOBS), max_size=6, unique_by=lambda k: k.key)):
        env[knob.key] = env_string(draw(typed_value(knob)))
    for key in draw(st.lists(st.sampled_from(FREE_ENV_KEYS), max_size=3, unique=True)):
        env[key] = draw(hostile)
    engine: dict[str, object] = {}
    for knob in draw(
        st.lists(st.sampled_from(ENGINE_KNOBS), max_size=8, unique_by=lambda k: k.key)
    ):
        engine[knob.key] = draw(typed_value(knob))
    for key in draw(st.lists(st.sampled_from(FREE_ENGINE_KEYS), max_size=3, unique=True)):
        engine[key] = draw(hostile)
    return EngineConfig(model=draw(model_names), env=env, engine=engine)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs(), name=st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,20}\Z"), description=hostile)
def test_export_then_import_is_identical(config: EngineConfig, name: str, description: str) -> None:
    preset = preset_from_config(
        config, name, description=description, created="2026-01-31T00:00:00Z"
    )
    text = dump_preset(preset)
    # The subject is a lossless round trip of any text, not the policy: the free keys carry
    # text the policy refuses without the user's consent, given here as the flags would.
    loaded = loads_preset(text, resolve=False, allow_env=CONSENTED_ENV, allow_code=True)
    assert loaded.config.config_id == config.config_id
    assert loaded.config.canonical() == config.canonical()
    assert loaded.config.serve_args() == config.serve_args()
    assert loaded.config.env_vars() == config.env_vars()
    assert loaded.description == description
    # And once more: the re-dumped text is byte-identical (a fixed point).
    assert dump_preset(loaded) == text


STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_OUT"], "w", encoding="utf-8") as fh:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, fh)
"""


def make_stub(bin_dir: Path) -> None:
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "vllm"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def run_script(
    script: Path, workdir: Path, extra_args: list[str], extra_env: dict[str, str]
) -> dict:
    out = workdir / "captured.json"
    env = {
        "PATH": f"{workdir / 'bin'}:/usr/bin:/bin",
        "STUB_OUT": str(out),
        "HOME": str(workdir),
        **extra_env,
    }
    proc = subprocess.run(
        ["bash", str(script), *extra_args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text(encoding="utf-8"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(config=configs(), description=hostile, extra=st.lists(hostile, max_size=3))
def test_launch_script_passes_exact_argv_and_env(
    tmp_path_factory, config: EngineConfig, description: str, extra: list[str]
) -> None:
    work = tmp_path_factory.mktemp("run")
    make_stub(work / "bin")
    header = header_lines(
        preset_name="p",
        description=description,
        trial_id=description,
        config_id=config.config_id,
        created="now",
        target=description,
    )
    script = work / "launch.sh"
    script.write_text(render_script(config, header), encoding="utf-8")
    captured = run_script(script, work, extra, {"PORT": "9123"})
    assert captured["argv"] == [
        "serve",
        *config.serve_args(),
        "--host=0.0.0.0",
        "--port=9123",
        *extra,
    ]
    for name, value in config.env_vars().items():
        assert captured["env"][name] == value
    assert not (work / "PWNED").exists()
    assert not list(work.glob("*PWNED*"))


def test_module_entry_and_overrides(tmp_path: Path) -> None:
    """VLLM_ENTRY=module runs `$PYTHON -m vllm.entrypoints.openai.api_server --model MODEL`."""
    config = EngineConfig(model="m $(touch PWNED)", engine={"max-num-seqs": 8})
    script = tmp_path / "launch.sh"
    script.write_text(render_script(config, ["# t"]))
    fake_python = tmp_path / "bin" / "fakepython"
    make_stub(tmp_path / "bin")
    fake_python.write_text((tmp_path / "bin" / "vllm").read_text())
    fake_python.chmod(0o755)
    captured = run_script(
        script,
        tmp_path,
        ["--enforce-eager"],
        {"VLLM_ENTRY": "module", "PYTHON": str(fake_python), "HOST": "127.0.0.1"},
    )
    assert captured["argv"] == [
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model=m $(touch PWNED)",
        "--max-num-seqs=8",
        "--host=127.0.0.1",
        "--port=8000",
        "--enforce-eager",
    ]
    assert not (tmp_path / "PWNED").exists()


def test_bad_entry_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(render_script(EngineConfig(model="m"), []))
    proc = subprocess.run(
        ["bash", str(script)],
        env={"PATH": os.environ["PATH"], "VLLM_ENTRY": "nope"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "VLLM_ENTRY must be 'serve' or 'module'" in proc.stderr


@settings(max_examples=60, deadline=None)
@given(value=hostile)
def test_quoting_gives_back_the_value_in_bash(value: str) -> None:
    """Both quoting forms (single quotes; one-line $'...' for YAML comments) are exact in bash."""
    from tuner.export.quoting import ansi_c_quote, comment_text, shell_quote

    for quoted in (shell_quote(value), ansi_c_quote(value)):
        proc = subprocess.run(
            ["bash", "-c", f"printf %s {quoted}"],
            capture_output=True,
            check=True,
            env={"LC_ALL": "C.UTF-8"},
        )
        assert proc.stdout.decode("utf-8") == value
    assert "\n" not in ansi_c_quote(value)
    assert "\n" not in comment_text(value) and "\r" not in comment_text(value)
