"""The shipped table of what vLLM declares is what the installed vLLM declares, today.

``scripts/vllm_tables.py`` reads vLLM's own parser, config classes and ``envs.py``; tunelab's
policy and flag checks decide from its output. Regenerating it from the installed release
must give the shipped file byte for byte: the day vLLM changes, this test names what changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tuner.vllm_tables import DEFAULT_VERSION, is_data, table, versions

REPO = Path(__file__).resolve().parents[1]


def test_the_installed_vllm_declares_what_the_shipped_table_says() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "vllm_tables.py"), "--print"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    marker = proc.stdout.find("@@")
    assert marker >= 0, proc.stderr[-3000:]
    fresh = json.loads(proc.stdout[marker + 2 :])
    shipped_file = REPO / "tuner" / "vllm_tables" / f"{fresh['vllm_version']}.json"
    assert shipped_file.exists(), (
        f"no table for the installed vLLM {fresh['vllm_version']}: run "
        "`.venv/bin/python scripts/vllm_tables.py` and commit the file"
    )
    shipped = json.loads(shipped_file.read_text())
    for part in ("serve_options", "configs", "env"):
        added = sorted(set(fresh[part]) - set(shipped[part]))
        gone = sorted(set(shipped[part]) - set(fresh[part]))
        changed = sorted(
            k for k in set(fresh[part]) & set(shipped[part]) if fresh[part][k] != shipped[part][k]
        )
        assert not (added or gone or changed), (
            f"{part}: added {added}, gone {gone}, changed {changed}"
        )
    assert fresh == shipped


def test_the_default_table_is_shipped_and_reads_the_known_kinds() -> None:
    assert DEFAULT_VERSION in versions()
    tbl = table()
    assert tbl.option_value("max-num-seqs") == {"kind": "int"}
    assert tbl.option_value("compilation-config") == {
        "kind": "config",
        "config": "CompilationConfig",
    }
    fields = tbl.config_fields("CompilationConfig")
    assert fields["inductor_compile_config"]["kind"] == "dict"
    assert is_data(fields["cudagraph_capture_sizes"])
    assert not is_data(fields["cache_dir"])
    assert tbl.env["VLLM_ROCM_USE_AITER"] == {"kind": "bool"}
    assert "no-enforce-eager" in tbl.flag_names and "enforce-eager" in tbl.flag_names


def test_an_unknown_release_gets_the_nearest_older_table() -> None:
    assert table("99.0.0").version == versions()[-1]
    assert table("0.1.0").version == versions()[0]
