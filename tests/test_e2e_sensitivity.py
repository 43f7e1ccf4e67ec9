"""Sensitivity-guided mixed precision with the real amd-quark: the outlier node ranks first, the ranking is reused on a
second run, and a searched prefix leaves exactly its nodes without Q/DQ in the trial's model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest

from .conftest import compile_and_run, needs_quark, outlier_model, qas, run_script

pytestmark = [pytest.mark.e2e, needs_quark]

SPEC = """\
qas: 1
name: outlier
model: models/outlier.onnx
calibration: {{folder: data/calib}}
evaluation: {{metric: L2}}
search:
  space:
    activation: [XInt8Spec]
    activation_params: {{symmetric: [true], calibration_method: [MinMax], only_if: activation}}
    weight: [XInt8Spec]
    weight_params: {{symmetric: [true], quant_granularity: [Tensor], only_if: weight}}
  two_stage: false
  n_trials: {n_trials}
keep_float:
  blocks:
    tail: ['^fc3$', '^relu3$']
  sensitivity: {{method: L2, samples: 4}}
  search: {{top_k: [0, 1, 2]}}
device: cpu
"""


def weights_quantized(model: onnx.ModelProto, name: str) -> bool:
    node = next(n for n in model.graph.node if n.name == name)
    producer = {o: n for n in model.graph.node for o in n.output}
    return any(producer.get(i) is not None and producer[i].op_type == "DequantizeLinear" for i in node.input[1:])


def test_the_outlier_node_ranks_first_the_ranking_is_reused_and_the_prefix_stays_float(tmp_path: Path) -> None:
    outlier_model(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(n_trials=3))
    first = qas("sensitivity", str(spec), "--python", sys.executable, timeout=600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    out = tmp_path / "autosearch_output"
    data = json.loads((out / "sensitivity.json").read_text())
    assert data["groups"][0]["name"] == "fc2", data["groups"]
    assert data["groups"][0]["score"] > 0.5 * data["baseline_error"]  # most of the error is fc2's
    above = {g["name"] for g in data["groups"] if g["above_noise"]}
    assert "fc2" in above and not above & {"relu1", "relu2", "head"}  # they help no sample, or some but not others
    assert ({"name": "tail", "nodes": ["fc3", "relu3"]}.items()
            <= next(g for g in data["groups"] if g["name"] == "tail").items())
    assert data["cost"]["quantizations"] == 1 and data["cost"]["inferences"] == 4 * (data["cost"]["candidates"] + 2)
    assert "1. fc2" in first.stdout
    key = data["key"]

    ran = run_script(out / "outlier_autosearch.py")  # the search: the ranking is read, not measured again
    assert "reusing sensitivity.json" in ran.stdout + ran.stderr
    assert json.loads((out / "sensitivity.json").read_text())["key"] == key
    best = json.loads((out / "best_config.json").read_text())
    assert best["keep_float"]["groups"][:1] == ["fc2"] and best["keep_float"]["nodes"][0] == "fc2"
    assert best["config"]["keep_float"]["top_k"] >= 1
    model = onnx.load(str(out / best["model"]))
    assert not weights_quantized(model, "fc2")  # kept float: no DequantizeLinear on its weights
    assert weights_quantized(model, "fc1") and weights_quantized(model, "head")  # the rest is quantized
    shown = qas("report", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "most sensitive: fc2 " in shown.stdout and "cost 1 quantization" in shown.stdout
    assert "sensitivity note  only 4 samples: the noise estimate is rough" in shown.stdout
    assert f"{len(above)} of {len(data['groups'])} groups are above their noise" in shown.stdout
    kept = next(line for line in shown.stdout.splitlines() if line.strip().startswith("kept float"))
    assert kept.split("float", 1)[1].strip().startswith(", ".join(best["keep_float"]["groups"]))


# --- Real model shapes (the zoo), the presets' families ---------------------------------------------------------
def weights_float(model: onnx.ModelProto, op_types: tuple[str, ...]) -> dict[str, bool]:
    """Each weight node (Conv/Gemm/MatMul reading a weight) of a quantized model: True when its weight is float."""
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type in op_types and len(node.input) > 1:
            weight = node.input[1]
            if weight in inits:
                out[node.name] = True
            elif weight in producer and producer[weight].op_type.endswith("DequantizeLinear"):
                out[node.name] = False
    return out


def sensitivity_spec(tmp_path: Path, name: str, preset: str, extra: str = "") -> tuple[object, Path]:
    from .zoo import build

    zm = build(name, tmp_path)
    spec = zm.write_spec(tmp_path, preset=preset, n_trials=1,
                         extra_yaml="keep_float:\n  sensitivity: {samples: 4}\n" + extra)
    return zm, spec


@pytest.mark.parametrize("name, preset", [("resnet_bn", "A8W8_SEARCH"), ("resnet_bn", "XINT8_SEARCH"),
                                          ("transformer", "A8W8_SEARCH"), ("detector", "A8W8_SEARCH"),
                                          ("detector", "XINT8_SEARCH")])
def test_the_ranking_covers_every_weight_layer_under_the_float_models_names(tmp_path: Path, name: str,
                                                                             preset: str) -> None:
    zm, spec = sensitivity_spec(tmp_path, name, preset)
    ran = qas("sensitivity", str(spec), "--python", sys.executable, timeout=900)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]  # A8W8: no "Duplicate definition of name"
    out = tmp_path / "autosearch_output"
    data = json.loads((out / "sensitivity.json").read_text())
    ranked = {n for g in data["groups"] for n in g["nodes"]}
    assert set(zm.weight_nodes) <= ranked, sorted(set(zm.weight_nodes) - ranked)  # Quark renamed or fused them
    float_names = {n.name for n in onnx.load(str(zm.model)).graph.node}
    assert ranked <= float_names and not data["skipped"]
    if name == "resnet_bn":  # BatchNormalization folded into its Conv: one candidate, both float nodes
        assert next(g for g in data["groups"] if "stem_conv" in g["nodes"])["nodes"] == ["stem_conv", "stem_bn"]
    if name == "transformer":  # MatMul+Add became a Gemm: one candidate, both float nodes
        assert next(g for g in data["groups"] if "fc1" in g["nodes"])["nodes"] == ["fc1", "fc1_add"]
    assert all({"score", "noise", "above_noise"} <= set(g) for g in data["groups"])
    assert "note: " in ran.stdout and ("within noise" in ran.stdout or "+-" in ran.stdout)
    assert not (out / "sensitivity.json.lock").exists()


def test_keeping_ranked_conv_groups_in_float_leaves_those_convs_unquantized_in_the_trials_model(tmp_path: Path) -> None:
    zm, spec = sensitivity_spec(tmp_path, "resnet_bn", "A8W8_SEARCH", "  search: {top_k: [20]}\n")
    out, ran = compile_and_run(spec)
    assert "keep_float: Quark quantized" not in ran.stdout + ran.stderr  # the runtime's own check agrees
    best = json.loads((out / "best_config.json").read_text())
    kept = best["keep_float"]["nodes"]
    assert {"stem_conv", "b2_conv2", "fc"} <= set(kept)  # every group kept: the weight layers among them
    model = onnx.load(str(out / best["model"]))
    state = weights_float(model, ("Conv", "Gemm"))
    assert state and all(state[n] for n in zm.weight_nodes if n in state), state
    assert set(zm.weight_nodes) <= set(state)


def test_the_golden_a8w8_spec_ranks_without_a_duplicate_definition(tmp_path: Path) -> None:
    import shutil

    from .conftest import EXAMPLE_DIR, GOLDEN

    shutil.copytree(EXAMPLE_DIR, tmp_path / "specs" / "example", ignore=shutil.ignore_patterns("autosearch_output"))
    case = tmp_path / "golden" / "sensitivity_top_k"
    case.mkdir(parents=True)
    shutil.copy(GOLDEN / "sensitivity_top_k" / "spec.yaml", case / "spec.yaml")
    ran = qas("sensitivity", str(case / "spec.yaml"), "--python", sys.executable, timeout=900)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    data = json.loads((case / "autosearch_output" / "sensitivity.json").read_text())
    assert {"conv1", "conv2"} <= {n for g in data["groups"] for n in g["nodes"]}


def test_a_partitioned_search_keeps_spans_of_the_graph_float_and_exports_exactly(tmp_path: Path) -> None:
    from compiler.runtime.sensitivity import node_order
    from compiler.runtime.sensitivity_rank import Ranking

    from .zoo import build

    zm = build("resnet_bn", tmp_path)
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=4, extra_yaml=(
        "keep_float: {sensitivity: {method: L2, samples: 4}, search: {strategy: partitioned, sections: 2}}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "autosearch_output"
    ranking = Ranking(json.loads((out / "sensitivity.json").read_text())["groups"], node_order(zm.model))
    report = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path).stdout)
    trials = [t for t in report["all_trials"] if t["state"] == "COMPLETE" and t["reused_from"] is None]
    assert len(trials) >= 3
    kept_any = False
    for trial in trials:
        choice = trial["config"]["keep_float"]
        assert set(choice) == {"partitioned"} and len(choice["partitioned"]) == 2
        expected = ranking.float_nodes(choice)
        kept_any = kept_any or bool(expected["nodes"])
    assert kept_any, "no trial's spans held a group; the test proves nothing"
    number = next(t["number"] for t in trials if ranking.float_nodes(t["config"]["keep_float"])["nodes"])
    done = qas("export", "autosearch_output", "--trial", str(number), cwd=tmp_path, timeout=900)
    assert done.returncode == 0 and "exactly the value the study recorded" in done.stdout + done.stderr, (
        done.stdout[-2000:] + done.stderr[-2000:])


def test_a_granular_search_tries_the_informed_starting_points_first(tmp_path: Path) -> None:
    from .zoo import build

    zm = build("resnet_bn", tmp_path)
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=6, extra_yaml=(
        "keep_float: {sensitivity: {method: L2, samples: 4}, search: {strategy: granular}}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "autosearch_output"
    groups = len(json.loads((out / "sensitivity.json").read_text())["groups"])
    assert groups > 4, "the ranking is too short to tell the starting points apart"
    report = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path).stdout)
    sampler = sorted((t for t in report["all_trials"] if t["stage"] == "sampler"), key=lambda t: t["number"])
    first = [t["config"]["keep_float"]["granular"] for t in sampler[:5]]
    assert first == [[], list(range(groups)), [0], [0, 1], [0, 1, 2, 3]]  # none, all, top 1, 2, 4
    assert all(t["state"] == "COMPLETE" for t in sampler) and len(sampler) == 6
    best = json.loads((out / "best_config.json").read_text())
    assert best["keep_float"]["choice"] == best["config"]["keep_float"]
