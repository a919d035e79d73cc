"""The docker script mounts local model paths correctly; export file names never collide (issue 26).

``docker run -v SRC:DST`` splits on every ``:`` and resolves a relative
source against the daemon's working directory, so ``./models/llama`` and
``/data/a:b`` broke the script. The export now makes local paths absolute
at export time and mounts them with ``--mount``, which docker reads as one
CSV record; the mount value is checked here by parsing it back the way
docker does (shell word, then CSV fields, then ``key=value`` at the first
``=``). A preset named ``prod.docker`` would write ``prod.docker.sh``,
``prod``'s docker script: such names are refused. Through the real CLI.
"""

from __future__ import annotations

import csv
import io
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.cli import export as export_cli
from tuner.config import EngineConfig
from tuner.export.preset import PresetTarget, preset_from_config
from tuner.export.render import render_texts


def _preset_file(folder: Path, name: str, model: str) -> Path:
    path = folder / f"{name}.toml"
    quoted = model.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r")
    path.write_text(
        f'[preset]\nname = "{name}"\nschema_version = 1\n\n'
        f'[target]\nmodel = "{quoted}"\nvllm_version = "0.10.2"\nplatform = "rocm"\n\n'
        "[engine]\nmax-num-seqs = 8\n"
    )
    return path


def _export(*args: str) -> tuple[int, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    export_cli.register(app)
    result = CliRunner().invoke(app, ["export", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.output


def _mount_and_model(script: str) -> tuple[dict[str, str] | None, str]:
    """The --mount fields as docker reads them, and the model ``vllm serve`` gets."""
    words = shlex.split(script.split("docker run", 1)[1], comments=False)
    mount = None
    if "--mount" in words:
        record = next(csv.reader(io.StringIO(words[words.index("--mount") + 1])))
        mount = dict(f.split("=", 1) if "=" in f else (f, "") for f in record)
    return mount, words[words.index("serve") + 1]


@pytest.mark.parametrize(
    "model",
    ["./models/llama", "models/llama", "../up/m", "sub/a:b", 'sub/c,d"e=f g', "sub/it's"],
)
def test_local_model_paths_are_mounted_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    work = tmp_path / "work"
    (work / model).mkdir(parents=True)
    monkeypatch.chdir(work)
    _preset_file(work, "p", model)
    code, out = _export("--preset", str(work / "p.toml"), "--out", "out", "--format", "docker")
    assert code == 0, out
    script = (work / "out" / "p.docker.sh").read_text()
    absolute = str((work / model).resolve())
    mount, served = _mount_and_model(script)
    assert mount == {"type": "bind", "source": absolute, "target": absolute, "readonly": ""}
    assert served == absolute
    assert " -v '" not in script  # no SRC:DST volume for the model


def test_absolute_path_with_colons_is_one_mount(tmp_path: Path) -> None:
    model = "/data/a:b:ro,rw"
    config = EngineConfig(model=model, engine={"max-num-seqs": 8})
    preset = preset_from_config(config, "p", target=PresetTarget(model=model, platform="rocm"))
    script = render_texts(preset, ["docker"])["docker"]
    mount, served = _mount_and_model(script)
    assert mount == {"type": "bind", "source": model, "target": model, "readonly": ""}
    assert served == model


def test_hub_ids_are_not_mounted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _preset_file(tmp_path, "p", "org/name")
    code, out = _export("--preset", "p.toml", "--out", "out", "--format", "docker")
    assert code == 0, out
    mount, served = _mount_and_model((tmp_path / "out" / "p.docker.sh").read_text())
    assert mount is None and served == "org/name"


def test_a_path_docker_cannot_mount_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _preset_file(tmp_path, "p", "/models/a\rb")
    code, out = _export("--preset", "p.toml", "--out", "out")
    assert code == 2, out
    assert "carriage return, which docker's --mount cannot carry" in out
    assert "fix: rename the model directory" in out
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("args", [("--name", "prod.docker"), ("--name", "Prod.DOCKER")])
def test_a_name_ending_in_another_formats_suffix_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _preset_file(tmp_path, "prod", "org/name")
    assert _export("--preset", "prod.toml", "--out", "out")[0] == 0
    docker = (tmp_path / "out" / "prod.docker.sh").read_text()
    code, out = _export("--preset", "prod.toml", "--out", "out", "--force", *args)
    assert code == 2, out
    assert f"the file name {args[1]!r} ends in" in out
    assert "would be the docker file of a preset named" in out
    assert "fix: rename the preset, or pass --name" in out
    assert (tmp_path / "out" / "prod.docker.sh").read_text() == docker  # untouched
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "prod.docker.sh",
        "prod.sh",
        "prod.toml",
        "prod.yaml",
    ]


def test_a_preset_named_like_a_docker_script_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _preset_file(tmp_path, "prod.docker", "org/name")
    code, out = _export("--preset", "prod.docker.toml", "--out", "out")
    assert code == 2, out
    assert "'prod.docker' ends in '.docker'" in out
    assert not (tmp_path / "out").exists()
