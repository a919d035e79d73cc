"""Atomic writes: a failed export leaves no partial file and says what happened.

The read-only and full-disk cases are real where this process can make them
real: a read-only directory (chmod for a normal user; a read-only tmpfs
mount when running as root, since root ignores permission bits) and a tiny
tmpfs that fills up. A fake at the ``os.write`` boundary covers ENOSPC on
machines where no small file system can be mounted.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tmpfs import mount_tmpfs
from tuner.config import EngineConfig
from tuner.export import files
from tuner.export.errors import ExportError
from tuner.export.files import atomic_write
from tuner.export.render import export

CONFIG = EngineConfig(
    model="org/model", env={"VLLM_ROCM_USE_AITER": "1"}, engine={"max-num-seqs": 8}
)


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody (this process included) can create files in."""
    target = tmp_path / "ro"
    target.mkdir()
    if os.geteuid() != 0:
        target.chmod(0o555)
        yield target
        target.chmod(0o755)
        return
    if not mount_tmpfs(target, "ro,size=64k"):
        pytest.skip("running as root without permission to mount a read-only tmpfs")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 16 KiB tmpfs (root only): a real full disk."""
    target = tmp_path / "tiny"
    target.mkdir()
    if os.geteuid() != 0 or not mount_tmpfs(target, "size=16k"):
        pytest.skip("needs root to mount a tiny tmpfs; the ENOSPC fake below covers this case")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_write_and_refuse_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    atomic_write(path, "one")
    with pytest.raises(ExportError, match="already exists; pass --force"):
        atomic_write(path, "two")
    assert path.read_text() == "one"
    atomic_write(path, "three", force=True)
    assert path.read_text() == "three"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_readonly_directory(readonly_dir: Path) -> None:
    with pytest.raises(ExportError) as info:
        export(CONFIG, readonly_dir, ["toml", "sh"], name="p")
    message = str(info.value)
    assert "could not write" in message
    assert "read-only" in message or "permission denied" in message
    assert "--out" in message
    assert list(readonly_dir.iterdir()) == []


def test_disk_full_for_real(tiny_fs: Path) -> None:
    with pytest.raises(ExportError, match="disk is full"):
        atomic_write(tiny_fs / "big.bin", b"x" * 200_000)
    assert list(tiny_fs.iterdir()) == []


def test_disk_full_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FAKE at the os.write boundary: the disk fills up halfway through the file."""
    real_write = os.write
    calls = {"n": 0}

    def full_after_first(fd: int, data) -> int:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data[:10]))

    monkeypatch.setattr(files.os, "write", full_after_first)
    with pytest.raises(ExportError) as info:
        atomic_write(tmp_path / "x.toml", "a" * 100)
    assert "disk is full" in str(info.value)
    assert "ENOSPC" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_failure_midway_removes_files_this_export_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAKE: the third file's fsync fails; the two written before it are removed again."""
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            return real_fsync(fd)
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", failing_fsync)
    with pytest.raises(ExportError, match="could not write"):
        export(CONFIG, tmp_path, ["toml", "sh", "yaml", "docker"], name="p")
    assert list(tmp_path.iterdir()) == []


def test_existing_files_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "p.sh").write_text("keep me")
    with pytest.raises(ExportError, match="already exist"):
        export(CONFIG, tmp_path, ["toml", "sh"], name="p")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.sh"]
    assert (tmp_path / "p.sh").read_text() == "keep me"
    written = export(CONFIG, tmp_path, ["toml", "sh"], force=True, name="p")
    assert [p.name for p in written] == ["p.toml", "p.sh"]
    assert (tmp_path / "p.sh").read_text().startswith("#!/usr/bin/env bash")


def test_refused_env_blocks_export_without_writing(tmp_path: Path) -> None:
    config = CONFIG.with_values({"LD_PRELOAD": "/tmp/evil.so"})
    with pytest.raises(ExportError, match="LD_PRELOAD"):
        export(config, tmp_path / "out", ["toml", "sh"], name="p")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    written = export(config, tmp_path / "out", ["toml", "sh"], name="p", allow_env=["LD_PRELOAD"])
    assert "export LD_PRELOAD='/tmp/evil.so'" in written[1].read_text()


def test_secrets_are_never_written(tmp_path: Path) -> None:
    config = CONFIG.with_values({"HF_TOKEN": "hf_s3cr3t", "VLLM_API_KEY": "k3y"})
    written = export(config, tmp_path, ["toml", "sh", "yaml", "docker"], name="p")
    for path in written:
        text = path.read_text()
        assert "hf_s3cr3t" not in text and "k3y" not in text
    assert "-e HF_TOKEN \\" in (tmp_path / "p.docker.sh").read_text()


def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(
        ExportError, match="unknown format 'json'; choose from toml, sh, yaml, docker"
    ):
        export(CONFIG, tmp_path, ["toml", "json"])
