"""End to end with the real amd-quark on CPU: compile a spec, run the script, check what it leaves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import onnx
import pytest

from .conftest import compile_and_run, needs_quark, run_script

pytestmark = [pytest.mark.e2e, needs_quark]


def complete_trials(db: Path) -> list[tuple[int, float]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT t.number, v.value FROM trials t JOIN trial_values v ON v.trial_id = t.trial_id "
            "WHERE t.state = 'COMPLETE' ORDER BY t.number").fetchall()


def op_types(model: Path) -> set[str]:
    return {n.op_type for n in onnx.load(str(model)).graph.node}


def use_autosearchpro(spec: Path) -> None:
    spec.write_text(spec.read_text().replace("  n_trials:", "  engine: autosearchpro\n  n_trials:"))


def test_autosearchpro_example_search_runs_and_resumes_to_the_total(example_copy: Path) -> None:
    use_autosearchpro(example_copy / "spec.yaml")
    out, _ran = compile_and_run(example_copy / "spec.yaml")
    best = json.loads((out / "best_config.json").read_text())
    trials = complete_trials(out / "tinycnn_study.db")
    assert len(trials) == 3  # n_trials: 3, not more, not clamped
    number, value = min(trials, key=lambda t: t[1])
    assert (best["trial_number"], best["value"], best["stage"]) == (number, value, "sampler")
    assert best["model"] == f"quantized_model_{number}.onnx"
    winner = out / best["model"]
    assert winner.is_file()
    assert op_types(winner) & {"QuantizeLinear", "DequantizeLinear", "ExtendedQuantizeLinear",
                               "ExtendedDequantizeLinear"}
    # nested config, not Quark's flattened names (F8); stage-1 settings kept in stage 2 (F4)
    config = best["config"]
    assert config["algorithms"] in ("adaround", "adaquant")
    assert config[f"{config['algorithms']}_params"]["optim_device"] == "cpu"
    assert config["OptimizeModel"] is True and "activation_params" in config
    assert not any(k.startswith("activation_params_") for k in config)
    assert (out / "best_params.json").is_file()
    assert not (example_copy / "quantized_info.csv").exists()  # kept out of the caller's directory
    # re-running resumes: the total is already reached, nothing is quantized again
    again = run_script(out / "tinycnn_autosearch.py")
    assert "3 of 3 trials done, 0 to run" in again.stdout
    assert complete_trials(out / "tinycnn_study.db") == trials
    assert json.loads((out / "best_config.json").read_text())["trial_number"] == number


GRID_SPEC = """qas: 1
name: gridsize
model: models/tinycnn.onnx
calibration: {folder: data/calib, limit: 4}
evaluation:
  evaluator: evals.py:model_bytes
  higher_is_better: false
search:
  space:
    activation: [Int8Spec]
    activation_params:
      calibration_method: [MinMax, Percentile]
      only_if: activation
    weight: [Int8Spec, Int16Spec]
    weight_params:
      symmetric: [true]
      only_if: weight
  sampler: Grid
  n_trials: 4
device: cpu
"""


def test_autosearchpro_grid_search_with_a_lower_is_better_evaluator_keeps_the_smallest(example_copy: Path) -> None:
    (example_copy / "spec.yaml").write_text(GRID_SPEC)
    use_autosearchpro(example_copy / "spec.yaml")
    (example_copy / "evals.py").write_text("import os\n\n\ndef model_bytes(path):\n    return os.path.getsize(path)\n")
    out, _ = compile_and_run(example_copy / "spec.yaml")
    best = json.loads((out / "best_config.json").read_text())
    sizes = {p.name: p.stat().st_size for p in out.glob("quantized_model*.onnx")}
    assert len(sizes) == 4
    assert best["stage"] == "grid" and best["trial_number"] is None
    assert sizes[best["model"]] == min(sizes.values())  # F6: oriented the right way round
    assert best["config"]["weight"] == "Int8Spec"  # 8-bit weights make the smaller file
    float_bytes = (example_copy / "models" / "tinycnn.onnx").stat().st_size  # what the evaluator gave the float model
    assert best["float_score"] == float_bytes
    assert best["float_score"] + best["value"] == sizes[best["model"]]  # lower is better: value = quantized - float
