"""Model intake on real files: a QDQ model made by onnxruntime is refused, a >2 GB single file is refused; samples
that misfit the model's input are refused with the numpy that converts them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from compiler.commands.pipeline import compile_spec

from .conftest import EXAMPLE_DIR, GOLDEN, dynamic_model, qdq_model, target_env


def spec_for(folder: Path, model: str) -> Path:
    shutil.copytree(EXAMPLE_DIR / "data" / "calib", folder / "calib")
    spec = folder / "spec.yaml"
    spec.write_text(f"qas: 1\nname: t\nmodel: {model}\ncalibration: {{folder: calib}}\n"
                    "search: {preset: XINT8_SEARCH, n_trials: 3}\ndevice: cpu\n")
    return spec


def test_a_model_quantized_by_onnxruntime_is_refused(tmp_path: Path) -> None:
    qdq_model(tmp_path / "qdq.onnx")
    result = compile_spec(spec_for(tmp_path, "qdq.onnx"))
    assert [d.code for d in result.diagnostics] == ["QAS702"]
    assert (result.diagnostics[0].path == ("model",)
            and (result.diagnostics[0].line, result.diagnostics[0].col) == (3, 8))
    assert not result.files


def test_a_dynamically_quantized_model_is_refused_naming_its_ops_as_qas_init_does(tmp_path: Path) -> None:
    dynamic_model(tmp_path / "dynamic.onnx")
    result = compile_spec(spec_for(tmp_path, "dynamic.onnx"))
    assert [d.code for d in result.diagnostics] == ["QAS702"] and not result.files
    found = result.diagnostics[0]
    assert found.path == ("model",) and (found.line, found.col) == (3, 8)
    assert found.message == ("the model is already quantized (dynamic quantization, as onnxruntime's quantize_dynamic "
                             "writes): it has ConvInteger x2, DynamicQuantizeLinear x3, MatMulInteger x1; a "
                             "quantization search starts from the float model")
    assert found.hint == "point `model` at the float model it was made from (the model quantize_dynamic was given)"


def test_a_single_file_over_2_gb_is_refused_without_reading_it(tmp_path: Path) -> None:
    with open(tmp_path / "huge.onnx", "wb") as handle:
        handle.truncate(2 * 1024**3 + 1)  # sparse
    result = compile_spec(spec_for(tmp_path, "huge.onnx"))
    assert [d.code for d in result.diagnostics] == ["QAS704"]


def test_the_example_model_analysis(tmp_path: Path) -> None:
    result = compile_spec(EXAMPLE_DIR / "spec.yaml")
    facts = json.loads(result.files["model_analysis.json"])
    assert facts["inputs"] == [{"name": "input", "dtype": "float32", "shape": [1, 3, 32, 32]}]
    assert facts["outputs"] == [{"name": "logits", "dtype": "float32", "shape": [1, 10]}]
    assert facts["op_counts"] == {"Conv": 2, "Flatten": 1, "GlobalAveragePool": 1, "Gemm": 1, "Relu": 2}
    assert facts["opsets"] == {"ai.onnx": 17} and facts["ir_version"] == 8
    assert not (facts["has_qdq"] or facts["has_qoperator"] or facts["has_quark_custom_ops"])
    assert facts["samples"] == {"calibration": 8, "evaluation": 4}
    assert facts["size_bytes"] == (EXAMPLE_DIR / "models" / "tinycnn.onnx").stat().st_size


def test_a_model_quark_produced_is_refused_too(tmp_path: Path) -> None:
    import onnx
    from onnx import helper

    model = onnx.load(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"))
    model.graph.node.append(helper.make_node("VitisQuantizeLinear", ["logits", "s", "z"], ["q"],
                                             domain="com.vai.quantize"))
    onnx.save(model, str(tmp_path / "vai.onnx"))
    result = compile_spec(spec_for(tmp_path, "vai.onnx"))
    assert [d.code for d in result.diagnostics] == ["QAS702"]
    assert "Quark custom-domain ops" in result.diagnostics[0].message


@pytest.mark.parametrize("location", ["../secret.bin", "ABSOLUTE", "sub/../../secret.bin", ""])
def test_external_data_outside_the_models_folder_is_refused_and_never_read(tmp_path: Path, location: str) -> None:
    import onnx
    from onnx import numpy_helper

    from compiler.check.intake_facts import analyze_model

    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"x" * 12345)
    folder = tmp_path / "work"
    folder.mkdir()
    model = onnx.load(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"))
    tensor = numpy_helper.from_array(np.zeros(4, "float32"), "unused.weight")
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", str(secret) if location == "ABSOLUTE" else location
    model.graph.initializer.append(tensor)
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    facts = analyze_model(folder / "m.onnx")
    assert [e["bytes"] for e in facts["external_data"]] == [None]  # its size is not recorded
    assert facts["size_bytes"] == (folder / "m.onnx").stat().st_size
    result = compile_spec(spec_for(folder, "m.onnx"))
    assert [(d.code, d.path, d.line, d.col) for d in result.diagnostics] == [("QAS716", ("model",), 3, 8)]
    assert not result.files


def test_sample_hints_say_how_to_convert_and_the_conversion_fixes_the_sample(tmp_path: Path) -> None:
    good = np.load(EXAMPLE_DIR / "data" / "calib"
                   / sorted(p.name for p in (EXAMPLE_DIR / "data" / "calib").iterdir())[0])
    assert good.dtype == np.float32 and good.shape == (1, 3, 32, 32)
    folder = tmp_path / "calib"
    folder.mkdir()
    np.save(folder / "a_float64.npy", good.astype("float64"))
    np.save(folder / "b_no_batch.npy", good[0])
    np.save(folder / "c_extra_axis.npy", good[np.newaxis])
    np.savez(folder / "d_named.npz", input=good.astype("float16"))
    np.savez(folder / "e_misnamed.npz", image=good)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"qas: 1\nname: t\nmodel: {EXAMPLE_DIR / 'models' / 'tinycnn.onnx'}\n"
                    "calibration: {folder: calib}\n"
                    "search: {preset: XINT8_SEARCH, n_trials: 3}\ndevice: cpu\n")
    env = target_env(GOLDEN)
    found = [d for d in compile_spec(spec, env).diagnostics if d.code == "QAS707"]
    hints = {d.message.split("'")[1].split("/")[1]: d.hint for d in found}
    assert sorted(hints) == ["a_float64.npy", "b_no_batch.npy", "c_extra_axis.npy", "d_named.npz",
                             "e_misnamed.npz"], found
    assert 'astype("float32")' in hints["a_float64.npy"] and "np.newaxis" in hints["b_no_batch.npy"]
    assert "np.expand_dims" in hints["b_no_batch.npy"] and "[0]" in hints["c_extra_axis.npy"]
    assert "np.savez(path, **arrays)" in hints["d_named.npz"]
    assert hints["e_misnamed.npz"] == "name the array after the input: np.savez(path, input=np.load(path)['image'])"
    for name, hint in hints.items():  # the code after the first ': ' is what a user pastes, with path set
        exec(hint.split(": ", 1)[1], {"np": np, "path": str(folder / name)})
    assert [d for d in compile_spec(spec, env).diagnostics if d.code == "QAS707"] == []
