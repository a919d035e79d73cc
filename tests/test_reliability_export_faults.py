"""Exporting onto a full disk or into a read-only directory, through the real CLI command.

``tests/test_export_files.py`` proves the atomic writer itself; here the
whole ``tunelab export`` command is run against a *real* full file system (a
tmpfs filled to its last page) and a real read-only mount, as root may mount
them here and in CI. Where mounting is refused the disk-full case falls back
to a fake at the ``os.write`` boundary (named as one) and says so in its
skip/parameter id. What must hold: exit code 1, a message naming the file
and the cause, no new or partial file, and an existing file that ``--force``
was about to replace left byte-identical.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.support.tmpfs import mount_tmpfs
from tuner.cli import export as export_cli


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    export_cli.register(app)

    @app.command("noop")
    def _noop() -> None:
        pass

    return app


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs with one old export in it, then filled to the last byte."""
    target = tmp_path / "full"
    target.mkdir()
    if os.geteuid() != 0 or not mount_tmpfs(target, "size=64k"):
        pytest.skip("cannot mount a tmpfs here; test_export_files.py's os.write fake covers ENOSPC")
    try:
        (target / "cpu-demo.toml").write_text("# the previous export, to be kept intact\n")
        fd = os.open(target / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 512)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


@pytest.fixture
def readonly_mount(tmp_path: Path) -> Iterator[Path]:
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


def _listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "filler"}


@pytest.mark.parametrize("force", [False, True], ids=["new-files", "force-overwrite"])
def test_full_disk(app: typer.Typer, full_disk: Path, force: bool) -> None:
    before = _listing(full_disk)
    args = ["export", "--preset", "cpu-demo", "--out", str(full_disk)]
    if force:
        args.append("--force")
    else:
        (full_disk / "cpu-demo.toml").unlink()  # frees one page only: the first file may fit
        before = _listing(full_disk)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "disk is full" in result.output and "ENOSPC" in result.output, result.output
    assert str(full_disk) in result.output
    assert _listing(full_disk) == before  # nothing new, nothing partial, the old file intact
    assert not [p for p in full_disk.iterdir() if p.name.startswith(".")], "temporary file left"


def test_read_only_directory(app: typer.Typer, readonly_mount: Path) -> None:
    result = CliRunner().invoke(
        app, ["export", "--preset", "cpu-demo", "--out", str(readonly_mount)]
    )
    assert result.exit_code == 1, result.output
    assert "read-only" in result.output or "permission denied" in result.output, result.output
    assert list(readonly_mount.iterdir()) == []


def test_read_only_parent_of_a_new_out_dir(app: typer.Typer, readonly_mount: Path) -> None:
    out = readonly_mount / "new" / "dir"
    result = CliRunner().invoke(app, ["export", "--preset", "cpu-demo", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "cannot create" in result.output and "Read-only" in result.output, result.output
    assert list(readonly_mount.iterdir()) == []
