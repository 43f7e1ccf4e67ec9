"""Built-in task metrics (issue 22.2): metric top1 | top5 with evaluation.labels, scored as the drop from the float
model's accuracy. Compile-time checks (QAS502-504) and the runtime's accuracy without Quark; one search with the real
amd-quark on the example classifier, reported as a top1 drop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compiler.commands.pipeline import compile_spec
from compiler.runtime.scoring import load_labels, top_k_accuracy

from .conftest import EXAMPLE_DIR, needs_quark, qas, run_script

SEARCH = "search:\n  preset: XINT8_SEARCH\n  n_trials: 2\n  two_stage: false\ndevice: cpu\n"


def spec_in(folder: Path, evaluation: str, search: str = SEARCH) -> Path:
    """The example's model and samples (copied), with that evaluation block."""
    (folder / "models").mkdir(parents=True, exist_ok=True)
    (folder / "models" / "tinycnn.onnx").write_bytes((EXAMPLE_DIR / "models" / "tinycnn.onnx").read_bytes())
    for sub in ("calib", "eval"):
        (folder / "data" / sub).mkdir(parents=True, exist_ok=True)
        for f in sorted((EXAMPLE_DIR / "data" / sub).glob("*.npy")):
            (folder / "data" / sub / f.name).write_bytes(f.read_bytes())
    spec = folder / "spec.yaml"
    spec.write_text("qas: 1\nname: cls\nmodel: models/tinycnn.onnx\ncalibration: {folder: data/calib}\n"
                    f"evaluation:\n{evaluation}{search}", encoding="utf-8")
    return spec


def found(spec: Path) -> list[tuple[str, str, str]]:
    return [(d.code, ".".join(map(str, d.path)), d.message) for d in compile_spec(spec).diagnostics]


def test_top1_with_a_json_list_compiles_to_a_drop_minimized(tmp_path: Path) -> None:
    spec = spec_in(tmp_path, "  metric: top1\n  labels: data/labels.json\n  data: {folder: data/eval}\n")
    (tmp_path / "data" / "labels.json").write_text("[1, 2, 3, 4]")
    result = compile_spec(spec)
    assert result.ok, result.diagnostics
    assert result.plan.settings.direction == "minimize" and result.plan.higher_is_better is True
    assert result.plan.settings.labels == {"file": "../data/labels.json"}
    assert "labels={'file': '../data/labels.json'}," in result.files["cls_autosearch.py"]
    assert "    labels: \"../data/labels.json\"\n" in result.files["run_manifest.yaml"]
    assert json.loads(result.files["quant_plan.json"])["settings"]["labels"] == {"file": "../data/labels.json"}


def test_labels_are_required_for_top1_and_refused_for_distances(tmp_path: Path) -> None:
    assert found(spec_in(tmp_path / "a", "  metric: top5\n")) == [
        ("QAS502", "evaluation.metric", "metric top5 scores a classifier against labels, but evaluation.labels is "
                                        "missing")]
    assert found(spec_in(tmp_path / "b", "  metric: L2\n  labels: label\n")) == [
        ("QAS502", "evaluation.labels", "labels are for metric top1 or top5, but metric L2 takes none")]


def test_autosearchpro_cannot_evaluate_top1(tmp_path: Path) -> None:
    spec = spec_in(tmp_path, "  metric: top1\n  labels: label\n",
                   SEARCH.replace("n_trials: 2", "n_trials: 2\n  engine: autosearchpro"))
    assert [c for c, *_ in found(spec)] == ["QAS503"]


def test_top1_works_with_grid_and_two_stage_under_engine_qas(tmp_path: Path) -> None:
    (tmp_path / "labels.npy").parent.mkdir(parents=True, exist_ok=True)
    spec = spec_in(tmp_path, "  metric: top1\n  labels: data/labels.npy\n",
                   "search:\n  preset: XINT8_SEARCH\n  n_trials: 2\n  two_stage: true\ndevice: cpu\n")
    np.save(tmp_path / "data" / "labels.npy", np.arange(8))
    assert compile_spec(spec).ok
    grid = spec_in(tmp_path / "g", "  metric: top1\n  labels: data/labels.npy\n",
                   "search:\n  space:\n    activation: [Int8Spec]\n    activation_params:\n"
                   "      calibration_method: [MinMax, Percentile]\n      only_if: activation\n    weight: [Int8Spec]\n"
                   "  sampler: Grid\n  n_trials: 2\ndevice: cpu\n")
    np.save(tmp_path / "g" / "data" / "labels.npy", np.arange(8))
    assert compile_spec(grid).ok, compile_spec(grid).diagnostics


def test_the_labels_count_must_equal_the_samples(tmp_path: Path) -> None:
    spec = spec_in(tmp_path, "  metric: top1\n  labels: data/labels.npy\n  data: {folder: data/eval, limit: 3}\n")
    np.save(tmp_path / "data" / "labels.npy", np.arange(4))
    assert found(spec) == [("QAS504", "evaluation.labels", "labels file 'data/labels.npy' has 4 entries, but "
                                                            "evaluation.data has 3 samples")]
    np.save(tmp_path / "data" / "labels.npy", np.zeros(3, np.float32))
    assert "holds float32 [3]" in found(spec)[0][2]
    (tmp_path / "data" / "labels.json").write_text('["cat", 1]')
    spec.write_text(spec.read_text().replace("labels.npy", "labels.json"))
    assert "must be a JSON list of integers" in found(spec)[0][2]


def test_a_labels_name_missing_from_the_samples_is_located(tmp_path: Path) -> None:
    spec = spec_in(tmp_path, "  metric: top1\n  labels: label\n  data: {folder: data/npz}\n")
    (tmp_path / "data" / "npz").mkdir()
    x = np.load(EXAMPLE_DIR / "data" / "eval" / "sample_000.npy")
    np.savez(tmp_path / "data" / "npz" / "a.npz", input=x, label=np.int64(3))
    np.savez(tmp_path / "data" / "npz" / "b.npz", input=x, lbl=np.int64(3))
    assert found(spec) == [("QAS504", "evaluation.labels", "sample 'data/npz/b.npz' has no array 'label' "
                                                            "(it has input, lbl)")]
    spec.write_text(spec.read_text().replace("labels: label", "labels: input"))
    assert found(spec)[0][2] == "labels 'input' is a model input, not the labels"
    spec.write_text(spec.read_text().replace("data: {folder: data/npz}", "data: {folder: data/eval}"))
    assert found(spec)[0][0] == "QAS504"  # .npy samples hold no named array: ... 'input' is still the model input


def test_top5_needs_five_classes_and_one_output(tmp_path: Path) -> None:
    import onnx
    from onnx import helper

    spec = spec_in(tmp_path, "  metric: top5\n  labels: data/labels.npy\n")
    np.save(tmp_path / "data" / "labels.npy", np.arange(8))
    x = helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 32, 32])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    shape = helper.make_tensor("shape", onnx.TensorProto.INT64, [2], [1, -1])
    nodes = [helper.make_node("Reshape", ["input", "shape"], ["flat"]),
             helper.make_node("Slice", ["flat", "starts", "ends", "axes"], ["y"])]
    inits = [shape] + [helper.make_tensor(n, onnx.TensorProto.INT64, [1], [v]) for n, v in
                       (("starts", 0), ("ends", 4), ("axes", 1))]
    model = helper.make_model(helper.make_graph(nodes, "four", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "models" / "tinycnn.onnx"))
    assert found(spec) == [("QAS504", "evaluation.metric", "metric top5 needs at least 5 classes, but output 'y' has "
                                                           "shape [1, 4] (4 along its last axis)")]


def test_top_k_accuracy_counts_rows_and_refuses_a_mismatch() -> None:
    scores = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1]])
    assert top_k_accuracy([(scores, np.array([1, 1]))], 1) == 0.5
    assert top_k_accuracy([(scores, np.array([1, 1]))], 2) == 1.0
    assert top_k_accuracy([(scores[:1], np.array([1])), (scores[1:], np.array([2]))], 1) == 0.5
    with pytest.raises(ValueError, match="gives 2 rows of class scores"):
        top_k_accuracy([(scores, np.array([1]))], 1)


def test_labels_load_from_npz_arrays_npy_and_json_in_sample_order(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    for name, label in (("b.npz", [4, 5]), ("a.npz", 7), ("c.npz", 1)):
        np.savez(tmp_path / "s" / name, input=np.zeros(2), label=np.asarray(label))
    got = load_labels({"array": "label"}, tmp_path, {"folder": "s", "limit": 2})
    assert [g.tolist() for g in got] == [[7], [4, 5]]
    np.save(tmp_path / "l.npy", np.array([3, 1]))
    assert [g.tolist() for g in load_labels({"file": "l.npy"}, tmp_path, {})] == [[3], [1]]
    (tmp_path / "l.json").write_text("[2, [0, 1]]")
    assert [g.tolist() for g in load_labels({"file": "l.json"}, tmp_path, {})] == [[2], [0, 1]]


@pytest.mark.e2e
@needs_quark
def test_a_top1_search_on_a_real_classifier_reports_the_drop(tmp_path: Path) -> None:
    """The example's 10-class CNN, labelled with its own float predictions (so the float top1 is 1.0), searched with
    the real Quark: every trial's value is the float top1 minus the quantized model's, and the report says so."""
    import onnxruntime

    spec = spec_in(tmp_path, "  metric: top1\n  labels: label\n  tolerance: \"10%\"\n  data: {folder: data/npz}\n",
                   "search:\n  preset: XINT8_SEARCH\n  override:\n    adaround_params:\n      num_iterations: [2]\n"
                   "    adaquant_params:\n      num_iterations: [2]\n      data_size: [4]\n"
                   "  n_trials: 2\n  two_stage: false\ndevice: cpu\n")
    session = onnxruntime.InferenceSession(str(tmp_path / "models" / "tinycnn.onnx"))
    (tmp_path / "data" / "npz").mkdir()
    rng = np.random.default_rng(0)
    for i in range(12):
        x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        label = int(np.argmax(session.run(None, {"input": x})[0]))
        np.savez(tmp_path / "data" / "npz" / f"s{i:02}.npz", input=x, label=np.int64(label))
    compiled = qas("compile", str(spec))
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    out = tmp_path / "autosearch_output"
    run_script(next(out.glob("*_autosearch.py")))
    best = json.loads((out / "best_config.json").read_text())
    assert best["float_score"] == 1.0
    assert 0.0 <= best["value"] <= 1.0 and (best["value"] * 12) == pytest.approx(round(best["value"] * 12))
    assert best["tolerance"]["bound"] == pytest.approx(0.1)  # "10%" of the float model's top1, in accuracy points
    assert best["tolerance"]["met"] == (best["value"] <= 0.1)
    report = qas("report", str(out), "--format", "json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["metric"] == "top1" and data["higher_is_better"] is True and data["float_score"] == 1.0
    text = qas("report", str(out))
    assert "top1 drop" in text.stdout and "top1 1 (trial values are the drop from it)" in text.stdout, text.stdout


EVALUATOR = '''\
import json
import os
from pathlib import Path

import numpy as np
import onnxruntime
from quark.onnx.operators.custom_ops import get_library_path


def top1(model_path):
    """README's evaluator contract: a resolved path in, a number out; Quark's custom ops registered."""
    here = Path(__file__).parent
    with open(here / "seen.jsonl", "a") as seen:
        seen.write(json.dumps([os.getcwd(), model_path]) + "\\n")
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(get_library_path("CPU"))
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    hits = 0
    files = sorted((here / "data" / "npz").glob("*.npz"))
    for path in files:
        with np.load(path) as sample:
            hits += int(np.argmax(session.run(None, {"input": sample["input"]})[0]) == int(sample["label"]))
    return hits / len(files)
'''


@pytest.mark.e2e
@needs_quark
def test_the_readme_evaluator_contract_holds_and_agrees_with_the_built_in_top1(tmp_path: Path) -> None:
    """The evaluator README describes (working directory: the output folder; a resolved path, the float model first;
    Quark's custom-op library registered) scores the same configurations as metric top1 does, drop for drop."""
    import onnxruntime

    search = ("search:\n  preset: XINT8_SEARCH\n  override:\n    adaround_params:\n      num_iterations: [2]\n"
              "    adaquant_params:\n      num_iterations: [2]\n      data_size: [4]\n"
              "  n_trials: 2\n  two_stage: false\ndevice: cpu\n")
    builtin = spec_in(tmp_path / "builtin", "  metric: top1\n  labels: label\n  data: {folder: data/npz}\n", search)
    user = spec_in(tmp_path / "user", "  evaluator: evals.py:top1\n  higher_is_better: true\n", search)
    (tmp_path / "user" / "evals.py").write_text(EVALUATOR)
    session = onnxruntime.InferenceSession(str(tmp_path / "builtin" / "models" / "tinycnn.onnx"))
    rng = np.random.default_rng(1)
    for folder in ("builtin", "user"):
        (tmp_path / folder / "data" / "npz").mkdir()
    for i in range(10):
        x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        label = int(np.argmax(session.run(None, {"input": x})[0])) if i % 3 else 0  # some labels wrong
        for folder in ("builtin", "user"):
            np.savez(tmp_path / folder / "data" / "npz" / f"s{i:02}.npz", input=x, label=np.int64(label))
    values = {}
    for folder, spec in (("builtin", builtin), ("user", user)):
        compiled = qas("compile", str(spec))
        assert compiled.returncode == 0, compiled.stdout + compiled.stderr
        out = tmp_path / folder / "autosearch_output"
        run_script(next(out.glob("*_autosearch.py")))
        best = json.loads((out / "best_config.json").read_text())
        values[folder] = (best["float_score"], best["value"])
    assert values["builtin"] == pytest.approx(values["user"])
    assert 0 < values["builtin"][0] < 1  # some labels are wrong: the float model's top1 is a real accuracy
    seen = [json.loads(line) for line in (tmp_path / "user" / "seen.jsonl").read_text().splitlines()]
    out = (tmp_path / "user" / "autosearch_output").resolve()
    assert {cwd for cwd, _ in seen} == {str(out)}  # the working directory is the output folder
    assert seen[0][1] == str((tmp_path / "user" / "models" / "tinycnn.onnx").resolve())  # the float model first
    assert all(Path(p).is_absolute() and Path(p).parent == out for _, p in seen[1:])
