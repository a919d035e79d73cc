"""``tunelab check --model`` on hostile config.json and safetensors files (issue 26).

A model directory is foreign input: Rich markup or escapes in a name must
print literally, and a non-finite or absurd number (``1e400`` reads as
infinity) must be a clear exit-2 message naming the field, never a traceback.
Every field the analysis reads is covered through :func:`from_config`; the
CLI tests go through Typer's CliRunner as a user meets them.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from tuner.cli import check as check_cli
from tuner.model import analyze
from tuner.model.config_check import SIZE_BOUNDS
from tuner.model.info import ModelError, from_config
from tuner.rules import Target

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
LLAMA = CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"
TARGET = ["--platform", "rocm", "--vllm-version", "0.10.2", "--gpus", "8", "--vram-gib", "192"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))


def _llama() -> dict[str, object]:
    return json.loads(LLAMA.read_text())


def _model_dir(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(text)
    return folder


def _with_raw(key: str, literal: str) -> str:
    """The Llama config with ``key`` set to a raw JSON literal (1e400 and NaN stay as written)."""
    cfg = _llama()
    cfg[key] = "@@"
    return json.dumps(cfg).replace('"@@"', literal)


def _check(*args: str) -> tuple[int, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    check_cli.register(app)
    result = CliRunner().invoke(app, ["check", *args, *TARGET])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.output


def test_markup_and_escapes_in_architectures_print_literally(tmp_path: Path) -> None:
    cfg = _llama()
    cfg["architectures"] = ["[bold]X[/][link=http://evil]y[/link]\x1b[31m\u202ez"]
    code, out = _check("--model", str(_model_dir(tmp_path, json.dumps(cfg))))
    assert code == 0, out
    assert "Model: model: [bold]X[/][link=http://evil]y[/link]<U+202E>z, GQA" in out
    assert "\x1b" not in out and "\u202e" not in out


@pytest.mark.parametrize(
    ("key", "literal", "shown"),
    [
        ("hidden_size", "1e400", "inf"),
        ("num_hidden_layers", "-1e400", "-inf"),
        ("vocab_size", "NaN", "nan"),
        ("num_hidden_layers", str(10**30), str(10**30)),
        ("num_attention_heads", "-5", "-5"),
        ("intermediate_size", "Infinity", "inf"),
        ("architectures", "1e400", "inf"),
        ("model_type", '{"[/]": 1}', "{'[/]': 1}"),
    ],
)
def test_absurd_numbers_are_exit_2_naming_the_field(
    tmp_path: Path, key: str, literal: str, shown: str
) -> None:
    code, out = _check("--model", str(_model_dir(tmp_path, _with_raw(key, literal))))
    assert code == 2, out
    assert f"config.json has {key} = {shown}; tunelab expects" in out
    assert "fix: check the model's config.json" in out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("literal", "says"),
    [
        ("9" * 5000, "a number with thousands of digits"),
        ("[" * 5000 + "]" * 5000, "nests arrays or objects more than 64 levels deep"),
    ],
)
def test_unparseable_config_is_exit_2(tmp_path: Path, literal: str, says: str) -> None:
    code, out = _check("--model", str(_model_dir(tmp_path, _with_raw("vocab_size", literal))))
    assert code == 2, out
    assert says in out and "Traceback" not in out


@pytest.mark.parametrize("key", sorted(SIZE_BOUNDS))
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 10**30, -1, "12", [4], 2.5])
def test_every_size_field_refuses_absurd_values(key: str, value: object) -> None:
    cfg = {**_llama(), key: value}
    with pytest.raises(ModelError, match=rf"{key} = .*whole number from 1 to"):
        from_config(cfg, name="m", source="test", path=None)


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("architectures", "LlamaForCausalLM", "architectures"),
        ("architectures", [7], "architectures"),
        ("architectures", {"0": "x"}, "architectures"),
        ("model_type", ["llama"], "model_type"),
        ("torch_dtype", 16, "torch_dtype"),
        ("dtype", {"x": 1}, "dtype"),
        ("moe_layers", [1, float("inf")], "moe_layers[…]"),
        ("moe_layers", "all", "moe_layers"),
        ("mlp_only_layers", [[1]], "mlp_only_layers[…]"),
        ("mlp_only_layers", [-1], "mlp_only_layers[…]"),
        ("quantization_config", {"quant_method": "awq", "bits": float("inf")}, "bits"),
        ("quantization_config", {"quant_method": "gptq", "group_size": float("nan")}, "group_size"),
        ("quantization_config", {"quant_method": 5}, "quant_method"),
        ("quantization_config", {"quant_method": "awq", "modules_to_not_convert": 3}, "modules"),
        (
            "quantization_config",
            {"quant_method": "compressed-tensors", "config_groups": [1]},
            "config_groups",
        ),
        (
            "quantization_config",
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": "x"}}},
            },
            "num_bits",
        ),
        (
            "quantization_config",
            {"quant_method": "quark", "global_quant_config": "x"},
            "global_quant_config",
        ),
        (
            "quantization_config",
            {"quant_method": "quark", "global_quant_config": {"weight": ["fp4"]}},
            "global_quant_config.weight",
        ),
    ],
)
def test_every_other_field_read_refuses_the_wrong_type(key: str, value: object, field: str) -> None:
    cfg = {**_llama(), key: value}
    with pytest.raises(ModelError, match=r"config\.json has .*" + field.replace("[", r"\[")):
        from_config(cfg, name="m", source="test", path=None)


def test_required_field_given_as_null_is_missing() -> None:
    with pytest.raises(ModelError, match="has no hidden_size"):
        from_config({**_llama(), "hidden_size": None}, name="m", source="test", path=None)


def _shard(path: Path, header: str) -> None:
    blob = header.encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * 16)


@pytest.mark.parametrize(
    "header",
    [
        '{"w": {"dtype": "F16", "shape": [1e400], "data_offsets": [0, 2]}}',
        '{"w": {"dtype": "F16", "shape": ["x"], "data_offsets": [0, 2]}}',
        '{"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, NaN]}}',
        '{"w": {"dtype": "F16", "shape": [2], "data_offsets": 5}}',
        '{"w": {"dtype": "F16", "shape": [%s], "data_offsets": [0, 2]}}' % (10**30),
        "[" * 200 + "]" * 200,
    ],
)
def test_hostile_safetensors_header_falls_back_to_the_config_estimate(
    tmp_path: Path, header: str
) -> None:
    folder = _model_dir(tmp_path, LLAMA.read_text())
    _shard(folder / "model.safetensors", header)
    info = analyze(str(folder))
    assert info.weights_source == "config-estimate"
    assert any("safetensors metadata unreadable" in n for n in info.notes), info.notes
    code, out = _check("--model", str(folder))
    assert code == 0 and "Traceback" not in out


def test_index_total_size_of_1e400_is_ignored(tmp_path: Path) -> None:
    folder = _model_dir(tmp_path, LLAMA.read_text())
    (folder / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": 1e400}, "weight_map": {"a": ["not", "a", "name"]}}'
    )
    info = analyze(str(folder))
    assert info.weights_source == "config-estimate"


def test_a_fifo_shard_is_not_read(tmp_path: Path) -> None:
    """A FIFO named like a shard is refused, not opened: with no writer, open() would block."""
    folder = _model_dir(tmp_path, LLAMA.read_text())
    fifo = folder / "model.safetensors"
    os.mkfifo(fifo)
    # A writer that holds the FIFO open with a valid header in it, so that a reader that
    # does not check the file type gets data (and the test fails) instead of hanging.
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        blob = b'{"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}'
        os.write(writer, struct.pack("<Q", len(blob)) + blob)
        info = analyze(str(folder))
    finally:
        os.close(writer)
    assert info.weights_source == "config-estimate"
    assert any("not a regular file" in n for n in info.notes), info.notes


def test_a_model_name_too_long_for_the_file_system_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="cannot look up the model"):
        analyze("./" + "a" * 5000, offline=True)


def test_target_from_a_preset_prints_literally() -> None:
    target = Target(
        vllm_version="[/]0.1",
        platform="[bold]rocm",
        gpus=2,
        vram_gib=1.0,
        gpu_arch="gfx[/]",
        gpu_name="MI[link=x]300X\x1b]0;t\x07",
        note="[/]given",
    )
    console = Console(record=True, width=200, color_system=None)
    console.print(check_cli._target_line(target))
    assert console.export_text().strip() == (
        "Target: vLLM [/]0.1 on [bold]rocm, 2 GPUs x 1 GiB MI[link=x]300X (gfx[/]) ([/]given)"
    )
