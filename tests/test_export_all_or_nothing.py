"""``export --force`` is all or nothing: a failure on any file leaves every old file as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tuner.export.files as files
from tuner.config import EngineConfig
from tuner.export.errors import ExportError
from tuner.export.render import export

FORMATS = ("toml", "sh", "yaml", "docker")


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_force_failure_at_any_file_keeps_all_old_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    export(EngineConfig(model="org/old", engine={"max-num-seqs": 8}), tmp_path, FORMATS, name="p")
    before = _snapshot(tmp_path)
    calls = {"n": 0}
    real_replace = os.replace

    def flaky_replace(src: str, dst: object) -> None:
        if str(src).endswith(".tmp"):
            calls["n"] += 1
            if calls["n"] == fail_at:
                raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", flaky_replace)
    new = EngineConfig(model="org/new", engine={"max-num-seqs": 16})
    with pytest.raises(ExportError, match="no file was changed"):
        export(new, tmp_path, FORMATS, force=True, name="p")
    monkeypatch.setattr(files.os, "replace", real_replace)
    assert _snapshot(tmp_path) == before  # same names (no temp files left) and same bytes


def test_force_success_replaces_all(tmp_path: Path) -> None:
    export(EngineConfig(model="org/old"), tmp_path, FORMATS, name="p")
    export(EngineConfig(model="org/new"), tmp_path, FORMATS, force=True, name="p")
    texts = _snapshot(tmp_path)
    assert len(texts) == 4
    assert all(b"org/new" in t and b"org/old" not in t for t in texts.values())


def test_values_over_128_kib_are_refused_before_writing(tmp_path: Path) -> None:
    config = EngineConfig(model="org/m", engine={"chat-template": "x" * (130 * 1024)})
    with pytest.raises(ExportError, match="Argument list too long"):
        export(config, tmp_path / "out", FORMATS, name="p")
    assert not (tmp_path / "out").exists()


def test_toml_over_the_load_limit_is_refused(tmp_path: Path) -> None:
    # Twelve text arguments the policy knows to be data, each under the 128 KiB argv limit.
    keys = [
        "served-model-name",
        "chat-template",
        "tokenizer",
        "revision",
        "code-revision",
        "tokenizer-revision",
        "hf-config-path",
        "download-dir",
        "spec-model",
        "response-role",
        "root-path",
        "generation-config",
    ]
    engine = {key: "y" * 100_000 for key in keys}
    with pytest.raises(ExportError, match="KiB"):
        export(EngineConfig(model="org/m", engine=engine), tmp_path / "o", ["toml"], name="p")
    assert not (tmp_path / "o").exists()


def test_docker_image_pinned_where_a_tag_is_known() -> None:
    from tuner.export.docker import pick_image

    assert pick_image("cuda", "0.11.0")[0] == "vllm/vllm-openai:v0.11.0"
    image, note = pick_image("cuda", "0.32.0+cpu")
    assert image.endswith(":latest") and "Not pinned" in note
    image, note = pick_image("rocm", "0.12.0")
    assert image == "rocm/vllm:latest" and "Not pinned" in note and "0.12.0" in note
