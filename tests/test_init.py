"""qas init: a model in; a commented spec that validates (and compiles once its folder is filled), or a refusal
that writes nothing."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML

from compiler.commands.starter import spec_name

from .conftest import EXAMPLE_DIR, REPO, dynamic_model, model_with_external_data, needs_quark, qas, qdq_model

SCHEMA = Draft202012Validator(json.loads((REPO / "schemas" / "spec.schema.json").read_text(encoding="utf-8")))


def project(tmp_path: Path) -> Path:
    """A folder holding a copy of the example model under models/."""
    (tmp_path / "models").mkdir()
    shutil.copy(EXAMPLE_DIR / "models" / "tinycnn.onnx", tmp_path / "models")
    return tmp_path


def load_valid(spec: Path) -> dict:
    data = YAML(typ="safe", pure=True).load(spec.read_text(encoding="utf-8"))
    errors = [e.message for e in SCHEMA.iter_errors(data)]
    assert not errors, errors
    return data


def fill_calibration(folder: Path) -> None:
    for sample in sorted((EXAMPLE_DIR / "data" / "calib").glob("*.npy")):
        shutil.copy(sample, folder)


def two_input_model(path: Path) -> Path:
    """A tiny float model with two inputs, one with a dynamic batch dim: out = a + b."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["pixels", "offset"], ["out"], name="add")], "two",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("offset", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def nothing_written(folder: Path, before: set[str]) -> bool:
    return {p.name for p in folder.iterdir()} == before


def test_init_writes_a_valid_commented_spec_that_compiles_once_the_folder_is_filled(tmp_path: Path) -> None:
    folder = project(tmp_path)
    made = qas("init", "models/tinycnn.onnx", cwd=folder)
    assert made.returncode == 0, made.stderr
    spec = folder / "spec.yaml"
    data = load_valid(spec)
    assert data["qas"] == 1 and data["name"] == "tinycnn" and data["model"] == "models/tinycnn.onnx"
    assert data["calibration"] == {"folder": "data/calib", "limit": 64}
    assert data["evaluation"] == {"metric": "L2"}
    assert data["search"]["preset"] == "A8W8_SEARCH" and (data["search"]["n_trials"], data["search"]["seed"]) == (10, 0)
    assert data["device"] == "cpu" and data["output"] == {"dir": "autosearch_output"}
    text = spec.read_text(encoding="utf-8")
    assert 'one .npy file per sample' in text and 'input "input": float32, shape [1, 3, 32, 32]' in text
    assert (folder / "data" / "calib").is_dir() and not any((folder / "data" / "calib").iterdir())
    assert "wrote spec.yaml" in made.stderr and "created data/calib/" in made.stderr
    assert "qas run spec.yaml" in made.stderr
    fill_calibration(folder / "data" / "calib")
    compiled = qas("compile", "spec.yaml", cwd=folder)
    assert compiled.returncode == 0, compiled.stderr
    assert not re.search(r"error|warning", compiled.stderr), compiled.stderr


def test_the_spec_goes_where_output_says_with_paths_relative_to_it(tmp_path: Path) -> None:
    folder = project(tmp_path)
    (folder / "work").mkdir()
    made = qas("init", "models/tinycnn.onnx", "--output", "work/my search.yaml", "--device", "cuda:1", cwd=folder)
    assert made.returncode == 0, made.stderr
    data = load_valid(folder / "work" / "my search.yaml")
    assert data["model"] == "../models/tinycnn.onnx" and data["device"] == "cuda:1"
    assert "override" not in data["search"]  # a GPU keeps the preset's fine-tuning
    assert (folder / "work" / "data" / "calib").is_dir() and not (folder / "data").exists()
    assert "qas run 'work/my search.yaml'" in made.stderr


def test_a_model_with_external_data_says_to_keep_it_beside(tmp_path: Path) -> None:
    model_with_external_data(tmp_path, 16)
    made = qas("init", "big.onnx", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "spec.yaml").read_text(encoding="utf-8")
    assert '# (its external data "big.onnx_data" must stay beside it, under that name)\nmodel: big.onnx\n' in text


def test_an_existing_spec_is_kept_unless_force(tmp_path: Path) -> None:
    folder = project(tmp_path)
    (folder / "spec.yaml").write_text("mine\n")
    before = {p.name for p in folder.iterdir()}
    refused = qas("init", "models/tinycnn.onnx", cwd=folder)
    assert refused.returncode == 1 and "spec.yaml exists" in refused.stderr and "--force" in refused.stderr
    assert (folder / "spec.yaml").read_text() == "mine\n" and nothing_written(folder, before)
    forced = qas("init", "models/tinycnn.onnx", "--force", cwd=folder)
    assert forced.returncode == 0, forced.stderr
    load_valid(folder / "spec.yaml")


def test_an_existing_calibration_folder_is_left_as_it_is(tmp_path: Path) -> None:
    folder = project(tmp_path)
    (folder / "data" / "calib").mkdir(parents=True)
    fill_calibration(folder / "data" / "calib")
    made = qas("init", "models/tinycnn.onnx", cwd=folder)
    assert made.returncode == 0, made.stderr
    assert "already there (8 sample files)" in made.stderr
    assert len(list((folder / "data" / "calib").iterdir())) == 8


def test_a_model_quantized_by_onnxruntime_is_refused_and_nothing_written(tmp_path: Path) -> None:
    qdq_model(tmp_path / "qdq.onnx")
    before = {p.name for p in tmp_path.iterdir()}
    refused = qas("init", "qdq.onnx", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith("qdq.onnx: error[QAS702]: the model is already quantized"), refused.stderr
    assert nothing_written(tmp_path, before)


@pytest.mark.parametrize("make, named", [
    (dynamic_model, "(dynamic quantization, as onnxruntime's quantize_dynamic writes): it has ConvInteger x2, "
                    "DynamicQuantizeLinear x3, MatMulInteger x1;"),
    (lambda path: qdq_model(path, "QOperator"), "(QuantizeLinear/DequantizeLinear; QOperator ops): it has "
                                                "DequantizeLinear x1, QuantizeLinear x1, QLinearConv x2, "),
])
def test_a_quantized_model_is_refused_naming_the_ops_found(tmp_path: Path, make, named: str) -> None:
    make(tmp_path / "quantized.onnx")
    before = {p.name for p in tmp_path.iterdir()}
    refused = qas("init", "quantized.onnx", cwd=tmp_path)
    assert refused.returncode == 1
    first, hint = refused.stderr.splitlines()[:2]
    assert first.startswith("quantized.onnx: error[QAS702]: the model is already quantized " + named), first
    assert first.endswith("; a quantization search starts from the float model")
    assert hint.startswith("  hint: point `model` at the float model it was made from")
    assert nothing_written(tmp_path, before)


@pytest.mark.parametrize("case", ["not onnx", "missing external data", "no such file", "bad device"])
def test_other_refusals_write_nothing(tmp_path: Path, case: str) -> None:
    args = {"not onnx": ["notes.onnx"], "missing external data": ["big.onnx"], "no such file": ["nope.onnx"],
            "bad device": ["notes.onnx", "--device", "gpu0"]}[case]
    (tmp_path / "notes.onnx").write_text("these are not the weights you are looking for\n")
    model_with_external_data(tmp_path, 16, missing=True)
    before = {p.name for p in tmp_path.iterdir()}
    refused = qas("init", *args, cwd=tmp_path)
    code, says = {"not onnx": (1, "error[QAS701]"), "missing external data": (1, "error[QAS703]"),
                  "no such file": (2, "does not exist"), "bad device": (2, "is not cpu, cuda:N or rocm:N")}[case]
    assert refused.returncode == code and says in refused.stderr, refused.stderr
    assert nothing_written(tmp_path, before)


def test_a_two_input_model_gets_npz_samples_naming_both_inputs(tmp_path: Path) -> None:
    two_input_model(tmp_path / "two.onnx")
    made = qas("init", "two.onnx", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "spec.yaml").read_text(encoding="utf-8")
    load_valid(tmp_path / "spec.yaml")
    assert "The model has 2 inputs, so: one .npz file per sample" in text
    assert '#   "pixels": float32, shape [batch, 4] (dynamic: batch)' in text
    assert '#   "offset": float32, shape [1, 4]\n' in text
    assert 'numpy.savez("data/calib/sample_000.npz", **{"pixels": x1, "offset": x2})' in text
    assert '.npz file per sample with arrays "pixels", "offset"' in made.stderr
    np.savez(tmp_path / "data" / "calib" / "sample_000.npz", pixels=np.ones((2, 4), "float32"),
             offset=np.ones((1, 4), "float32"))
    compiled = qas("validate", "spec.yaml", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr


@pytest.mark.parametrize("file, name", [
    ("tinycnn.onnx", "tinycnn"),
    ("ResNet-50 v1.5.onnx", "ResNet_50_v1_5"),
    ("2stage__net.onnx", "model_2stage_net"),
    ("modèle.onnx", "modele"),
    ("___.onnx", "model"),
    ("x" * 80 + ".onnx", "x" * 64),
])
def test_the_name_comes_from_the_file_name_in_the_schema_pattern(file: str, name: str) -> None:
    assert spec_name(file) == name


@pytest.mark.e2e
@needs_quark
def test_init_then_run_completes_with_the_real_quark(tmp_path: Path) -> None:
    folder = project(tmp_path)
    made = qas("init", "models/tinycnn.onnx", cwd=folder)
    assert made.returncode == 0, made.stderr
    fill_calibration(folder / "data" / "calib")
    spec = folder / "spec.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("  n_trials: 10\n", "  n_trials: 2\n"), encoding="utf-8")
    ran = qas("run", "spec.yaml", "--yes", cwd=folder, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "qas: run completed (exit code 0)" in ran.stderr
    assert (folder / "autosearch_output" / "best_model.onnx").is_file()


def opset11_classifier(path: Path) -> Path:
    """A small float classifier exported at opset 11 (Conv, Relu, GlobalAveragePool, Flatten, Gemm), input like
    the example's so its samples fit."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.zeros(8, np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc_w"),
             numpy_helper.from_array(np.zeros(10, np.float32), "fc_b")]
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "old", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_the_starter_search_has_a_time_budget_and_says_how_long_it_takes(tmp_path: Path) -> None:
    folder = project(tmp_path)
    made = qas("init", "models/tinycnn.onnx", cwd=folder)
    assert made.returncode == 0, made.stderr
    data = load_valid(folder / "spec.yaml")
    assert data["search"]["stop"] == {"timeout": "20m"}
    assert re.search(r"expected duration: \S+ \S+ to \S+ \S+ \(rough, with 64 samples\), within the 20 min budget",
                     made.stderr), made.stderr
    assert "4. a larger search: raise n_trials in spec.yaml" in made.stderr
    assert "Next step, a larger search: raise n_trials" in (folder / "spec.yaml").read_text(encoding="utf-8")
    unbounded = qas("init", "models/tinycnn.onnx", "--minutes", "0", "-o", "all.yaml", cwd=folder)
    assert unbounded.returncode == 0, unbounded.stderr
    assert "stop" not in load_valid(folder / "all.yaml")["search"] and "no time budget" in unbounded.stderr


def test_a_search_longer_than_the_budget_is_cut_and_the_larger_search_is_the_next_step() -> None:
    from compiler.check.intake_facts import analyze_model
    from compiler.commands.starter import starter_text

    facts = analyze_model(EXAMPLE_DIR / "models" / "tinycnn.onnx")
    big = facts | {"size_bytes": 20_000_000, "op_counts": {"Conv": 50, "Relu": 50, "Add": 20}}  # a 20 MB ResNet-ish
    text = starter_text(big, "models/tinycnn.onnx", "spec.yaml", "cpu", minutes=10)
    assert "stop: {timeout: 10m}" in text
    found = re.search(r"the whole search above would take (\S+ \S+) to (\S+ \S+) here", text)
    assert found and found.group(2).endswith(("min", "h")), text
    assert "After 10 min no new trial" in text and "delete `stop` (or raise timeout)" in text


def test_an_opset_11_model_is_offered_a_converted_copy(tmp_path: Path) -> None:
    import onnx

    (tmp_path / "models").mkdir()
    opset11_classifier(tmp_path / "models" / "old.onnx")
    plain = qas("init", "models/old.onnx", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "note: the model is opset 11; per-channel quantization" in plain.stderr
    command = next(line for line in plain.stderr.splitlines() if "python -c" in line).strip()
    assert command.startswith("python -c 'import onnx") and '"models/old_opset13.onnx"' in command
    ran = subprocess.run(shlex.split(command.replace("python", sys.executable, 1)), cwd=tmp_path, capture_output=True,
                         text=True)
    assert ran.returncode == 0, ran.stderr  # the printed command converts the model as printed
    assert {o.domain or "": o.version
            for o in onnx.load(str(tmp_path / "models" / "old_opset13.onnx")).opset_import}[""] == 13
    (tmp_path / "models" / "old_opset13.onnx").unlink()
    assert load_valid(tmp_path / "spec.yaml")["model"] == "models/old.onnx"
    converted = qas("init", "models/old.onnx", "--convert-opset", "--force", cwd=tmp_path)
    assert converted.returncode == 0, converted.stderr
    assert "converted it from opset 11 to 13: models/old_opset13.onnx" in converted.stderr
    copy = tmp_path / "models" / "old_opset13.onnx"
    assert {o.domain or "": o.version for o in onnx.load(str(copy)).opset_import}[""] == 13
    assert load_valid(tmp_path / "spec.yaml")["model"] == "models/old_opset13.onnx"
    assert "converted to opset 13 by `qas init --convert-opset`" in (tmp_path / "spec.yaml").read_text()
    fill_calibration(tmp_path / "data" / "calib")
    compiled = qas("compile", "spec.yaml", cwd=tmp_path)
    assert compiled.returncode == 0 and "QAS705" not in compiled.stderr + compiled.stdout, compiled.stderr
    again = qas("init", "models/old.onnx", "--convert-opset", "-o", "second.yaml", cwd=tmp_path)
    assert again.returncode == 1 and "old_opset13.onnx exists; left as it is" in again.stderr


@pytest.mark.e2e
@needs_quark
def test_an_opset_11_model_converted_by_init_runs_its_search_with_the_real_quark(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    opset11_classifier(tmp_path / "models" / "old.onnx")
    made = qas("init", "models/old.onnx", "--convert-opset", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    fill_calibration(tmp_path / "data" / "calib")
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("  n_trials: 10\n", "  n_trials: 1\n"), encoding="utf-8")
    ran = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    best = json.loads((tmp_path / "autosearch_output" / "best_config.json").read_text())
    assert best["model"].endswith(".onnx") and (tmp_path / "autosearch_output" / "best_model.onnx").is_file()
