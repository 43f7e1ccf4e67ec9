"""Per-channel weights on a model below opset 13 (QAS717): refused at compile time wherever Channel comes from, with
fixes that work; the real Quark fails such a trial with the message the refusal predicts and passes at opset 13."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.check.passes.opset import convert_command
from compiler.commands.pipeline import compile_spec

from .conftest import EXAMPLE_DIR, REPO, needs_quark

OPSET11 = REPO / "golden" / "warn_old_opset" / "opset11.onnx"
QUARK_MESSAGE = "Per-Channel support with QDQ format requires onnx opset version 13 or above"


def spec_for(folder: Path, model: Path, search: str) -> Path:
    """A spec in `folder` for a copy of `model` (models/m.onnx) and the example's calibration samples."""
    (folder / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(model, folder / "models" / "m.onnx")
    shutil.copytree(EXAMPLE_DIR / "data" / "calib", folder / "calib", dirs_exist_ok=True)
    spec = folder / "spec.yaml"
    spec.write_text(f"qas: 1\nname: pc\nmodel: models/m.onnx\ncalibration: {{folder: calib}}\nsearch:\n{search}"
                    "device: cpu\n")
    return spec


CHANNEL_OVERRIDE = ("  preset: A8W8_SEARCH\n  override: {weight_params: {quant_granularity: [Tensor, Channel]}}\n"
                    "  n_trials: 3\n")


def codes(spec: Path) -> list[str]:
    return [d.code for d in compile_spec(spec).diagnostics]


def test_channel_in_an_override_on_opset_11_is_refused_where_it_was_written(tmp_path: Path) -> None:
    result = compile_spec(spec_for(tmp_path, OPSET11, CHANNEL_OVERRIDE))
    (d,) = [d for d in result.diagnostics if d.code == "QAS717"]
    assert not result.files
    assert d.path == ("search", "override", "weight_params", "quant_granularity", 1)
    assert "opset is 11" in d.message
    assert "convert_version" in d.hint and "quant_granularity: [Tensor]" in d.hint


@pytest.mark.parametrize("search", [
    "  preset: A8W8_SEARCH\n  n_trials: 3\n",  # no preset draws Channel
    "  preset: A8W8_SEARCH\n  override: {weight_params: {quant_granularity: [Tensor]}}\n  n_trials: 3\n",
    "  preset: A8W8_SEARCH\n  override: {activation_params: {quant_granularity: [Channel]}}\n  n_trials: 3\n",
    # Quark converts the model before quantizing when every ConvertOpsetVersion choice is 13 or above
    ("  preset: A8W8_SEARCH\n  override: {weight_params: {quant_granularity: [Channel]}, ConvertOpsetVersion: [13]}\n"
     "  n_trials: 3\n"),
])
def test_what_is_not_per_channel_weights_or_converts_the_model_compiles(tmp_path: Path, search: str) -> None:
    assert "QAS717" not in codes(spec_for(tmp_path, OPSET11, search))


def test_a_conversion_choice_below_13_is_no_fix(tmp_path: Path) -> None:
    search = CHANNEL_OVERRIDE.replace("Channel]}}", "Channel]}, ConvertOpsetVersion: [null, 13]}")
    assert "QAS717" in codes(spec_for(tmp_path, OPSET11, search))


def test_the_hints_command_converts_the_model_and_the_spec_then_compiles(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, OPSET11, CHANNEL_OVERRIDE)
    (d,) = [d for d in compile_spec(spec).diagnostics if d.code == "QAS717"]
    command, target = convert_command("models/m.onnx", external=False)
    assert command in d.hint and f"set model: {target}" in d.hint
    convert(command, tmp_path)
    spec.write_text(spec.read_text().replace("models/m.onnx", target))
    assert "QAS717" not in codes(spec) and "QAS705" not in codes(spec)


def test_a_path_with_quotes_stays_one_shell_word() -> None:
    command, _ = convert_command("it's \"odd\".onnx", external=True)
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-c"] and len(argv) == 3
    assert "save_as_external_data=True" in argv[2]
    compile(argv[2], "<hint>", "exec")  # valid Python


def convert(command: str, cwd: Path) -> None:
    argv = shlex.split(command)
    subprocess.run([sys.executable, *argv[1:]], cwd=cwd, check=True, capture_output=True)


class Reader:
    """The example's calibration samples, Quark's reader protocol."""

    def __init__(self) -> None:
        self.files, self.index = sorted((EXAMPLE_DIR / "data" / "calib").glob("*.npy"))[:4], 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.index >= len(self.files):
            return None
        self.index += 1
        return {"input": np.load(self.files[self.index - 1])}

    def rewind(self) -> None:
        self.index = 0


def quantize(model: Path, config: dict) -> None:
    from quark.onnx import ModelQuantizer

    from compiler.runtime.quantize import quark_qconfig

    ModelQuantizer(quark_qconfig(config, [])).quantize_model(str(model), str(model.with_name("q.onnx")), Reader())


@pytest.mark.e2e
@needs_quark
def test_real_quark_fails_per_channel_at_opset_11_and_passes_at_13(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # Quark appends quantized_info.csv to the working directory
    spec_for(tmp_path, OPSET11, CHANNEL_OVERRIDE)
    channel = {"activation": "Int8Spec", "activation_params": {"symmetric": True, "calibration_method": "MinMax"},
               "weight": "Int8Spec", "weight_params": {"symmetric": True, "quant_granularity": "Channel"}}
    with pytest.raises(ValueError, match=QUARK_MESSAGE):
        quantize(tmp_path / "models" / "m.onnx", channel)
    quantize(tmp_path / "models" / "m.onnx", {**channel, "ConvertOpsetVersion": 13})  # the in-space fix
    command, target = convert_command("models/m.onnx", external=False)
    convert(command, tmp_path)  # the hint's own command
    quantize(tmp_path / target, channel)
    assert (tmp_path / "models" / "q.onnx").is_file()


def test_the_zoos_opset_11_model_with_channel_is_refused_and_compiles_once_converted(tmp_path: Path) -> None:
    from .zoo import build

    zm = build("opset11", tmp_path)
    spec = zm.write_spec(tmp_path, preset="A8W8_SEARCH",
                         extra_yaml="search: {override: {weight_params: {quant_granularity: [Tensor, Channel]}}}\n")
    (d,) = [d for d in compile_spec(spec).diagnostics if d.code == "QAS717"]
    command, target = convert_command("models/opset11.onnx", external=False)
    assert command in d.hint
    convert(command, tmp_path)
    spec.write_text(spec.read_text().replace("models/opset11.onnx", target))
    assert "QAS717" not in codes(spec)


def test_every_other_zoo_model_takes_channel(tmp_path: Path) -> None:
    from .zoo import ZOO, build

    for name in ZOO:
        if name == "opset11":
            continue
        zm = build(name, tmp_path / name)
        spec = zm.write_spec(tmp_path / name, preset="A8W8_SEARCH",
                             extra_yaml="search: {override: {weight_params: {quant_granularity: [Channel]}}}\n")
        assert "QAS717" not in codes(spec), name
