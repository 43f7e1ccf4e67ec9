"""Every preset qas ships runs end to end with the real amd-quark on CPU: `qas run` to the report, on a tiny budget."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from ruamel.yaml import YAML

from compiler.check.presets import PRESET_NAMES
from compiler.resources import load_data

from .conftest import needs_quark, qas

pytestmark = [pytest.mark.e2e, needs_quark]

PRESETS = list(load_data("presets.json"))  # every preset qas ships, whatever is there
QDQ = {"QuantizeLinear", "DequantizeLinear", "ExtendedQuantizeLinear", "ExtendedDequantizeLinear"}

# The preset as Quark ships it, cut down to a tiny budget: one stage, two trials, a few fine-tuning iterations
# on a few samples. Seed 3 makes the two trials differ in A8W8_SEARCH's PercentileCandidates (a choice among
# lists), the case that used to crash the importances after the search.
SPEC = """qas: 1
name: {name}
model: models/tinycnn.onnx
calibration: {{folder: data/calib, limit: 4}}
evaluation: {{metric: L2}}
search:
  preset: {preset}
  override:
    adaround_params:
      num_iterations: {{type: int, low: 2, high: 4, step: 2}}
      data_size: [4]
    adaquant_params:
      num_iterations: {{type: int, low: 2, high: 4, step: 2}}
      data_size: [4]
  sampler: TPE
  seed: 3
  n_trials: 2
  two_stage: false
device: cpu
"""


def test_every_preset_qas_offers_is_run_here() -> None:
    assert sorted(PRESETS) == sorted(PRESET_NAMES)


@pytest.mark.parametrize("preset", PRESETS)
def test_the_preset_runs_from_search_to_report(example_copy: Path, preset: str) -> None:
    name = preset.lower()
    (example_copy / "spec.yaml").write_text(SPEC.format(name=name, preset=preset))
    out = example_copy / "autosearch_output"

    ran = qas("run", "spec.yaml", "--yes", cwd=example_copy, timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "Traceback" not in ran.stderr
    run = YAML(typ="safe").load((out / "run_manifest.yaml").read_text())["run"]
    assert run["status"] == "completed" and run["exit_code"] == 0
    assert run["outputs"]["trials_complete"] == 2 and run["outputs"]["trials_failed"] == 0
    assert run["outputs"]["budget_reached"] is True
    best = json.loads((out / "best_config.json").read_text())
    assert best["config"]["activation"] == load_data("presets.json")[preset]["search_space"]["activation"][0]
    assert QDQ & {node.op_type for node in onnx.load(str(out / "best_model.onnx")).graph.node}
    assert (out / "report.md").is_file()  # qas run writes the report after the search

    reported = qas("report", "autosearch_output", "--format", "json", cwd=example_copy, timeout=300)
    assert reported.returncode == 0, reported.stderr[-3000:]
    report = json.loads(reported.stdout)
    assert report["run_status"] == "completed"
    assert report["best"]["value"] == pytest.approx(run["outputs"]["best_value"])
    assert report["best"]["trial_number"] in (0, 1)
    assert "report.md" in report["files"]
    if preset == "A8W8_SEARCH":  # list choices varied, were left out of the importances, and nothing crashed
        top = [row["params"]["PercentileCandidates"] for row in report["top5"]]
        assert len({json.dumps(choice) for choice in top}) == 2, top
        assert any("leave out PercentileCandidates" in note for note in report["notes"]), report["notes"]
        assert report["importances"] and "PercentileCandidates" not in report["importances"]
