"""The hostile-preset corpus, and the judge that runs each case through ``tunelab export``.

Every case is a preset file an attacker or a careless colleague could hand
a user. The judge runs the real CLI command (``tunelab export --preset FILE
--out DIR``, all formats) and then:

- refused (non-zero exit): the message must be tunelab's own one-line error
  (no traceback) and the output directory must hold no file at all;
- accepted: the launch script and the docker script are *executed* by bash
  with harmless stand-ins for ``vllm`` and ``docker`` on PATH that record
  their argv. Nothing injected may run (a ``touch PWNED`` anywhere in the
  input would leave a file), the recorded argv must equal the config's own
  argv exactly, no file may land outside the output directory, and no
  secret value may appear in any written file.

A case is *unsafe* when it was accepted though it must be refused, when any
check of an accepted case fails, or when a refusal left a file behind; it is
*unclear* when a refusal crashed (traceback) or does not name the problem.
The suite requires zero of both; ``benchmarks/fault_loops.py`` counts both.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from tests.support.policy_corpus import Setting
from tests.support.policy_corpus import corpus as policy_corpus

INJECT = "$(touch PWNED)`touch PWNED`;touch PWNED"
CANARY = "hf_CANARY_do_not_write_7c1e"


@dataclass(frozen=True)
class Case:
    """One hostile input.

    Attributes:
        name: Short id.
        data: The file's bytes.
        must_refuse: True when accepting it at all is unsafe.
        mentions: Text the refusal message must contain (the key or reason).
    """

    name: str
    data: bytes
    must_refuse: bool
    mentions: str = ""


@dataclass
class Verdict:
    """What the judge saw for one case."""

    case: str
    refused: bool
    unsafe: bool
    detail: str = ""
    message: str = ""
    problems: list[str] = field(default_factory=list)
    unclear: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Safe, and refused (if refused) with tunelab's own clear message."""
        return not self.unsafe and not self.unclear


def document(
    *,
    name: str = "hostile",
    description: str = "a preset",
    model: str = "org/model",
    env: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """A preset TOML document (values escaped by tomli_w, so any string can go in)."""
    doc: dict[str, Any] = {
        "preset": {"name": name, "description": description, "schema_version": 1},
        "target": {"model": model, "platform": "rocm"},
        "env": env or {},
        "engine": {"max-num-seqs": 8, **(engine or {})},
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key].update(value)
        else:
            doc[key] = value
    return tomli_w.dumps(doc).encode()


def corpus() -> list[Case]:
    """Every hostile case (refusals first, then inputs that may be accepted if quoted)."""
    base = document().decode()
    nested = "{ a = " * 40 + "1" + " }" * 40
    cases = [
        Case("malformed-toml", b'[preset\nname = "x', True, "not valid TOML"),
        Case(
            "unterminated-string", base.replace('"org/model"', '"org/model').encode(), True, "TOML"
        ),
        Case("wrong-type-int", document(engine={"max-num-seqs": "lots"}), True, "max-num-seqs"),
        Case(
            "wrong-type-array",
            document(engine={"gpu-memory-utilization": [1, 2]}),
            True,
            "gpu-memory-utilization",
        ),
        Case("negative", document(engine={"max-num-seqs": -5}), True, "max-num-seqs"),
        Case(
            "beyond-int64",
            base.replace(
                "max-num-seqs = 8", "max-num-seqs = 100000000000000000000000000000"
            ).encode(),
            True,
            "max-num-seqs",
        ),
        Case("unknown-table", document(extra={"hooks": {"post": "touch PWNED"}}), True, "hooks"),
        Case("unknown-preset-key", document(extra={"preset": {"run": "touch PWNED"}}), True, "run"),
        Case("huge-file", base.encode() + b"#" * (1024 * 1024 + 16) + b"\n", True, "larger than"),
        Case(
            "deep-nesting-12",
            (
                base
                + "\n[engine.compilation-config]\nx = "
                + "{ a = " * 12
                + "1"
                + " }" * 12
                + "\n"
            ).encode(),
            True,
            "nested deeper",
        ),
        # Deep enough to blow Python's TOML parser's recursion, still far under 1 MiB.
        Case(
            "deep-nesting-5000",
            base.replace(
                "[engine]", "[engine]\ncompilation-config = " + "{ a = " * 5000 + "1" + " }" * 5000
            ).encode(),
            True,
            "nest",
        ),
        Case(
            "deep-arrays-50000",
            base.replace("[engine]", "[engine]\nx = " + "[" * 50000 + "]" * 50000).encode(),
            True,
            "nest",
        ),
        Case(
            "nested-40",
            base.replace("[engine]", "[engine]\ncompilation-config = " + nested).encode(),
            True,
            "nested deeper",
        ),
        Case("ld-preload", document(env={"LD_PRELOAD": "/tmp/evil.so"}), True, "LD_PRELOAD"),
        Case("pythonpath", document(env={"PYTHONPATH": "/tmp/evil"}), True, "PYTHONPATH"),
        Case("bash-env", document(env={"BASH_ENV": "/tmp/evil.sh"}), True, "BASH_ENV"),
        Case(
            "prompt-command",
            document(env={"PROMPT_COMMAND": "touch PWNED"}),
            True,
            "PROMPT_COMMAND",
        ),
        Case("path", document(env={"PATH": "/tmp/evil:/usr/bin"}), True, "PATH"),
        Case(
            "nccl-plugin",
            document(env={"NCCL_NET_PLUGIN": "/tmp/evil.so"}),
            True,
            "NCCL_NET_PLUGIN",
        ),
        Case("secret-hf-token", document(env={"HF_TOKEN": CANARY}), True, "HF_TOKEN"),
        Case("secret-api-key", document(env={"VLLM_API_KEY": CANARY}), True, "VLLM_API_KEY"),
        Case("env-name-injection", document(env={"VLLM_X;touch PWNED": "1"}), True, "VLLM_X"),
        Case("env-name-newline", document(env={"VLLM_X\ntouch PWNED": "1"}), True, "VLLM_X"),
        Case(
            "engine-key-injection",
            document(engine={"max-num-seqs --x $(touch PWNED)": 1}),
            True,
            "max-num-seqs",
        ),
        Case("nul-in-value", document(model="org/\x00model"), True, "NUL"),
        Case("nul-raw", base.encode() + b"\x00\n", True, "NUL"),
        Case("not-utf8", base.encode() + b"# \xff\xfe\n", True, "UTF-8"),
        Case(
            "schema-from-the-future",
            base.replace("schema_version = 1", "schema_version = 999").encode(),
            True,
            "schema",
        ),
        Case("empty-file", b"", True, ""),
        Case("reserved-host", document(engine={"host": "0.0.0.0"}), True, "host"),
        Case("reserved-port", document(engine={"port": 1}), True, "port"),
        # May be accepted, but only when every character reaches vLLM literally.
        # Absurd but representable: passed to vLLM literally, which refuses it at start-up.
        Case("huge-int", document(engine={"max-num-seqs": 2**62}), False),
        Case("model-injection", document(model=f"org/m'{INJECT}\"x"), False),
        Case("model-newline", document(model="org/m\ntouch PWNED\n"), False),
        Case("model-dash", document(model="--help $(touch PWNED)"), False),
        Case("description-injection", document(description=f"a\n{INJECT}\nrm -rf ~"), False),
        Case("name-injection", document(name=f"x{INJECT}"), False),
        Case("name-traversal", document(name="../../escaped"), False),
        Case("name-newline", document(name="a\nb"), False),
        Case("served-name-injection", document(engine={"served-model-name": f"n {INJECT}"}), False),
        Case("free-flag-quotes", document(engine={"chat-template": "'\"$HOME\\`${IFS}`"}), False),
        Case(
            "compilation-config-strings",
            document(engine={"compilation-config": {"mode": 3, "backend": f"x'{INJECT}"}}),
            False,
        ),
        Case("env-value-injection", document(env={"VLLM_LOGGING_LEVEL": f"INFO{INJECT}"}), False),
        Case("unicode-separators", document(description="a\u2028b\u0085c\rtouch PWNED"), False),
        # Issue 19: values that look like options reach vLLM as values (--key=value).
        Case(
            "served-name-flag", document(engine={"served-model-name": "--trust-remote-code"}), False
        ),
        Case("served-name-O3", document(engine={"served-model-name": "-O3"}), False),
        Case("tokenizer-O0", document(engine={"tokenizer": "-O0"}), False),
        # ... and a model that starts with "-" would be an option itself.
        Case("model-trust-remote-code", document(model="--trust-remote-code"), True, "./"),
        Case("model-O0", document(model="-O0"), True, "starts with '-'"),
        Case("lone-double-dash", document(engine={"served-model-name": "--"}), True, "'--'"),
        # Code-loading engine arguments need --allow-code (tuner/policy/engine_args.py).
        *[
            Case(f"code-{key}", document(engine={key: value}), True, key)
            for key, value in (
                ("trust-remote-code", True),
                ("tool-parser-plugin", "/tmp/pwn.py"),
                ("reasoning-parser-plugin", "/tmp/pwn.py"),
                ("worker-extension-cls", "evilpkg.Ext"),
                ("worker-cls", "evilpkg.Worker"),
                ("scheduler-cls", "evilpkg.Sched"),
                ("middleware", "evilpkg.mw"),
                ("logits-processors", ["evilpkg.LP"]),
                ("config", "/tmp/evil.yaml"),
                ("io-processor-plugin", "evil"),
                ("model-class-overrides", {"LlamaForCausalLM": "evilpkg:Model"}),
                ("distributed-executor-backend", "evilpkg.Exec"),
                ("logging-config", {"version": 1}),
            )
        ],
        Case(
            "code-kv-connector-module",
            document(engine={"kv-transfer-config": {"kv_connector_module_path": "evilpkg"}}),
            True,
            "kv_connector_module_path",
        ),
        Case(
            "code-compile-backend",
            document(engine={"compilation-config": {"backend": "evilpkg.backend"}}),
            True,
            "compilation-config.backend",
        ),
        Case(
            "code-custom-proposer",
            document(engine={"speculative-config": {"model": "evilpkg.Proposer"}}),
            True,
            "speculative-config.model",
        ),
        # Abbreviations would skip the knob's checks and be expanded by argparse.
        Case(
            "abbrev-gpu-memory",
            document(engine={"gpu-memory-util": 7.5}),
            True,
            "gpu-memory-utilization",
        ),
        Case(
            "abbrev-batched",
            document(engine={"max-num-batched": -1}),
            True,
            "max-num-batched-tokens",
        ),
        # Secrets in engine arguments are never written.
        Case("secret-engine-hf-token", document(engine={"hf-token": CANARY}), True, "HF_TOKEN"),
        Case("secret-engine-api-key", document(engine={"api-key": CANARY}), True, "VLLM_API_KEY"),
        Case(
            "env-name-trailing-newline",
            document(env={"VLLM_LOGGING_LEVEL\n": "INFO"}),
            True,
            "VLLM_LOGGING_LEVEL",
        ),
        Case(
            "value-over-128k",
            document(engine={"chat-template": "x" * (130 * 1024)}),
            True,
            "128 KiB",
        ),
        # Issue 26: every setting of the one policy corpus, as a shared preset.
        *[Case(f"policy-{s.name}", _policy_document(s), True, s.mentions) for s in policy_corpus()],
    ]
    return cases


def _policy_document(setting: Setting) -> bytes:
    env: dict[str, str] = {}
    engine: dict[str, Any] = {}
    setting.apply(env, engine)
    return document(env=env, engine=engine)


# ---------------------------------------------------------------------------------------------
STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_OUT"], "a", encoding="utf-8") as fh:
    fh.write(json.dumps({{"prog": os.path.basename(sys.argv[0]), "argv": sys.argv[1:]}}) + "\\n")
"""


def install_stubs(bin_dir: Path) -> None:
    """Harmless ``vllm`` and ``docker`` that only record their argv."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for prog in ("vllm", "docker"):
        path = bin_dir / prog
        path.write_text(STUB.format(python=sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _cli() -> Any:
    import typer

    from tuner.cli import export as export_cli

    app = typer.Typer()
    export_cli.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps `export` a named subcommand
        pass

    return app


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def judge(case: Case, work: Path, app: Any | None = None) -> Verdict:
    """Runs ``case`` through ``tunelab export`` in ``work`` (an empty directory)."""
    from typer.testing import CliRunner

    from tuner.export.preset import load_preset

    app = app or _cli()
    src = work / "in" / "preset.toml"
    src.parent.mkdir(parents=True)
    src.write_bytes(case.data)
    out = work / "out" / "deep"
    sandbox = work / "run"
    install_stubs(sandbox / "bin")
    before = {p for p in _files(work) if "out" not in p.relative_to(work).parts}
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    result = CliRunner().invoke(
        app, ["export", "--preset", str(src), "--out", str(out)], env={**env, "HF_TOKEN": CANARY}
    )
    message = result.output
    verdict = Verdict(case.name, refused=result.exit_code != 0, unsafe=False, message=message)
    problems = verdict.problems
    stray = {p for p in _files(work) if "out" not in p.relative_to(work).parts} - before
    if stray:
        problems.append(f"files written outside --out: {sorted(map(str, stray))}")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        verdict.unclear.append(
            f"crashed with {type(result.exception).__name__}: {result.exception}"
        )
    if verdict.refused:
        if "Traceback" in message or "tunelab export:" not in message:
            verdict.unclear.append(f"refusal is not a clear tunelab message: {message[-300:]!r}")
        if case.mentions and case.mentions.lower() not in message.lower():
            verdict.unclear.append(
                f"refusal does not mention {case.mentions!r}: {message[-300:]!r}"
            )
        if out.exists() and _files(out):
            problems.append(f"refused but wrote {[p.name for p in _files(out)]}")
        verdict.detail = "refused"
    else:
        if case.must_refuse:
            problems.append("accepted an input that must be refused")
        written = _files(out)
        for path in written:
            if CANARY in path.read_text(encoding="utf-8", errors="replace"):
                problems.append(f"the secret canary was written into {path.name}")
        toml = [p for p in written if p.suffix == ".toml"]
        if not toml:
            problems.append("accepted but wrote no preset")
        else:
            config = load_preset(toml[0], resolve=False).config
            problems += _run_scripts(written, config, sandbox)
        verdict.detail = f"accepted, wrote {len(written)} files"
    verdict.unsafe = bool(problems)
    return verdict


def _run_scripts(written: list[Path], config: Any, sandbox: Path) -> list[str]:
    problems: list[str] = []
    record = sandbox / "argv.jsonl"
    for script in (p for p in written if p.suffix == ".sh"):
        record.unlink(missing_ok=True)
        env = {
            "PATH": f"{sandbox / 'bin'}:/usr/bin:/bin",
            "STUB_OUT": str(record),
            "HOME": str(sandbox),
            "PORT": "8123",
        }
        proc = subprocess.run(
            ["bash", str(script)],
            cwd=sandbox,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if proc.returncode != 0:
            problems.append(f"{script.name} exited {proc.returncode}: {proc.stderr[-300:]}")
            continue
        calls = (
            [json.loads(line) for line in record.read_text().splitlines()]
            if record.exists()
            else []
        )
        if len(calls) != 1:
            problems.append(f"{script.name} ran {len(calls)} stub commands (expected exactly 1)")
            continue
        argv = calls[0]["argv"]
        serve = ["serve", *config.serve_args()]
        if calls[0]["prog"] == "vllm":
            expected = [*serve, "--host=0.0.0.0", "--port=8123"]
            if argv != expected:
                problems.append(f"{script.name}: vllm got {argv!r}, expected {expected!r}")
        elif argv[-len(serve) - 2 : -2] != serve:
            problems.append(
                f"{script.name}: docker got {argv!r}, expected it to end with {serve!r}"
            )
    if list(sandbox.rglob("*PWNED*")) or (sandbox.parent / "PWNED").exists():
        problems.append("injected text was executed (PWNED exists)")
    return problems


def run_corpus(work: Path) -> list[Verdict]:
    """Judges every case, each in its own directory under ``work``."""
    app = _cli()
    out = []
    for case in corpus():
        case_dir = work / case.name
        case_dir.mkdir(parents=True)
        out.append(judge(case, case_dir, app))
    return out
