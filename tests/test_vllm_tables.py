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

from tuner import knobs
from tuner.knobs import AvailabilityStatus
from tuner.knobs.types import KnobKind
from tuner.vllm_tables import DEFAULT_VERSION, exact, is_data, table, versions

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


def test_every_shipped_release_table_has_every_part() -> None:
    # A generator that silently stopped reading one part of an older release (a moved module)
    # would ship a table whose rules stay quiet for that release: each part must be there.
    for version in versions():
        tbl = table(version)
        assert tbl.version == version
        assert len(tbl.serve_options) > 200 and len(tbl.env) > 200, version
        assert tbl.attention is not None and tbl.attention.backends, version
        assert "ROCM_ATTN" in tbl.attention.backends, version
        assert tbl.quantization.get("methods") and tbl.quantization.get("platforms"), version
        assert set(tbl.platforms) == {"cpu", "cuda", "rocm"}, version
        assert "mbt_below_max_num_seqs" in tbl.config_refusals, version


def test_a_release_reads_its_own_patch_table_within_its_line() -> None:
    shipped = versions()
    assert {"0.19.0", "0.20.2", "0.25.1", "0.31.0", "0.32.0", "0.33.0"} <= set(shipped)
    assert exact("0.20.2").version == "0.20.2"  # type: ignore[union-attr]
    assert exact("0.20.9").version == "0.20.2"  # type: ignore[union-attr]
    assert exact("0.20.1rc1").version == "0.20.1"  # type: ignore[union-attr]
    assert exact("0.20.1.dev5+g1234").version == "0.20.1"  # type: ignore[union-attr]
    assert exact("0.18.0") is None  # older lines fall back to the hand-read facts


def test_the_catalogue_s_since_and_until_agree_with_every_generated_table() -> None:
    # The catalogue's release ranges were read by hand from the wheels; the generated tables
    # are vLLM's own declarations. A knob the catalogue calls present must be declared by
    # that release's table, and one it calls removed or not yet added must not be.
    disagree = []
    for version in versions():
        tbl = table(version)
        for key in knobs.keys():  # noqa: SIM118 - the catalogue module's keys(), not a dict
            knob = knobs.get(key)
            assert knob is not None
            if knob.kind is KnobKind.ENV and not key.startswith("VLLM_"):
                continue  # HIP_*, NCCL_*, AITER_*: read by the runtimes, not by envs.py
            if "compilation_field" in knob.extra:  # cudagraph-mode: a CompilationConfig field
                fields = tbl.config_fields("CompilationConfig")
                declared = knob.extra["compilation_field"] in fields
            elif knob.kind is KnobKind.ENV:
                declared = key in tbl.env
            else:
                declared = key in tbl.flag_names
            status = knobs.available(knob, version, None).status
            present = status not in (AvailabilityStatus.REMOVED, AvailabilityStatus.NOT_YET)
            if declared != present:
                disagree.append(f"{key} in {version}: table {declared}, catalogue {status}")
    assert not disagree, "\n".join(disagree)
