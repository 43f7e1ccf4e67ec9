"""Sensitivity-guided mixed precision with the real amd-quark: the outlier node ranks first, the ranking is reused on a
second run, and a searched prefix leaves exactly its nodes without Q/DQ in the trial's model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest

from .conftest import needs_quark, outlier_model, qas, run_script

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
    assert {"name": "tail", "nodes": ["fc3", "relu3"]}.items() <= next(g for g in data["groups"] if g["name"] == "tail").items()
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
    kept = next(line for line in shown.stdout.splitlines() if line.strip().startswith("kept float"))
    assert kept.split("float", 1)[1].strip().startswith(", ".join(best["keep_float"]["groups"]))
