"""keep_float.search strategy accuracy_control with the real amd-quark on zoo models: the fully quantized model, a
bisection over the ranking's prefixes, then drops; the answer proven and recorded, the winner exactly that model,
exported exactly, the same with two workers, and on a two-stage search its steps on the grid winner."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from .conftest import needs_quark, qas
from .zoo import build

pytestmark = [pytest.mark.e2e, needs_quark]

ONE_CONFIG = """
evaluation: {{tolerance: {tolerance}}}
search:
  preset: null
  override: null
  sampler: NSGAII
  two_stage: {two_stage}
  n_trials: {n_trials}
  objectives: [accuracy, quantized_fraction]
  workers: {workers}
  space:
    activation: [XInt8Spec]
    activation_params: {{symmetric: [true], calibration_method: {methods}, only_if: activation}}
    weight: [XInt8Spec]
    weight_params: {{symmetric: [true], only_if: weight}}
keep_float:
  sensitivity: {{method: L2, samples: 8}}
  search: {{strategy: accuracy_control}}
"""


def run_search(folder: Path, model: str, tolerance: float, workers: int = 1, two_stage: bool = False,
               methods: str = "[MinMax]", n_trials: int = 20) -> dict:
    """Build the zoo model, write and run its accuracy_control spec; `qas report --format json` out."""
    zm = build(model, folder)
    zm.write_spec(folder, extra_yaml=ONE_CONFIG.format(tolerance=tolerance, workers=workers,
                                                       two_stage=str(two_stage).lower(), methods=methods,
                                                       n_trials=n_trials))
    done = qas("run", "spec.yaml", "--yes", cwd=folder, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = qas("report", "autosearch_output", "--format", "json", cwd=folder)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_the_answer_is_the_fewest_groups_within_tolerance_and_is_the_winner(tmp_path: Path) -> None:
    report = run_search(tmp_path / "one", "resnet_bn", tolerance=0.1)
    record = report["accuracy_control"]
    steps = record["steps"]
    assert steps[0]["phase"] == "quantized" and steps[0]["within_tolerance"] is False, (
        "the quantized model is within tolerance: the test proves nothing about the bisection")
    assert record["proven"] and report["stopped"]["reason"] == "accuracy_control"
    groups = len(json.loads((tmp_path / "one" / "autosearch_output" / "sensitivity.json").read_text())["groups"])
    first_within = next(k for k, s in enumerate(steps, 1) if s["within_tolerance"])
    assert first_within <= math.ceil(math.log2(groups)) + 3
    assert {s["phase"] for s in steps} >= {"quantized", "prefix", "drop"}
    answer = record["answer"]
    within = [s for s in steps if s["within_tolerance"]]
    answer_step = next(s for s in within if s["choice"] == choice_of(answer))
    assert answer_step["nodes"] == min(s["nodes"] for s in within)  # no step within tolerance kept fewer float
    best = json.loads((tmp_path / "one" / "autosearch_output" / "best_config.json").read_text())
    assert best["config"]["keep_float"] == {"groups": answer} and best["trial_number"] == answer_step["trial"]
    assert best["keep_float"]["groups"] == answer_step["groups"]
    sampler = [t for t in report["all_trials"] if t["stage"] == "sampler" and t["state"] == "COMPLETE"]
    assert len(sampler) == len(steps) < 20  # it stopped once proven, well inside its cap

    again = qas("run", "spec.yaml", "--yes", cwd=tmp_path / "one", timeout=900)  # a re-run: proven, nothing new
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    rerun = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path / "one").stdout)
    assert len(rerun["accuracy_control"]["steps"]) == len(steps)

    exported = qas("export", "autosearch_output", "--trial", str(answer_step["trial"]), cwd=tmp_path / "one",
                   timeout=900)
    assert exported.returncode == 0 and "exactly the value the study recorded" in exported.stdout + exported.stderr, (
        exported.stdout[-2000:] + exported.stderr[-2000:])
    text = qas("report", "autosearch_output", cwd=tmp_path / "one").stdout
    assert "step 1 " in text and "fully quantized" in text and f"trial {answer_step['trial']} keeps" in text

    two = run_search(tmp_path / "two", "resnet_bn", tolerance=0.1, workers=2)  # the same answer with two workers
    assert two["accuracy_control"]["answer"] == answer
    assert len(two["accuracy_control"]["steps"]) == len(steps)


def choice_of(groups: list[int]) -> str:
    from compiler.runtime.sensitivity import choice_text

    return choice_text({"groups": groups})


def test_a_two_stage_search_runs_its_steps_on_the_grid_winner_within_its_cap(tmp_path: Path) -> None:
    report = run_search(tmp_path, "detector", tolerance=0.05, two_stage=True, methods="[MinMax, Percentile]",
                        n_trials=10)
    grid = [t for t in report["all_trials"] if t["stage"] == "grid" and t["state"] == "COMPLETE"]
    assert len(grid) == 2
    winner = min(grid, key=lambda t: t["value"])
    sampler = [t for t in report["all_trials"] if t["stage"] == "sampler" and t["state"] == "COMPLETE"]
    assert sampler and all({k: v for k, v in t["config"].items() if k != "keep_float"} == winner["config"]
                           for t in sampler)
    record = report["accuracy_control"]
    groups = len(json.loads((tmp_path / "autosearch_output" / "sensitivity.json").read_text())["groups"])
    first_within = next(k for k, s in enumerate(record["steps"], 1) if s["within_tolerance"])
    assert first_within <= math.ceil(math.log2(groups)) + 3
    # the drops of a long prefix take more than the cap: the search ends at n_trials, said as not proven
    assert len(sampler) == 10 and not record["proven"] and report["stopped"] is None
    assert "not proven yet" in qas("report", "autosearch_output", cwd=tmp_path).stdout


def test_no_answer_when_even_the_whole_ranking_kept_float_is_outside_tolerance(tmp_path: Path) -> None:
    report = run_search(tmp_path, "resnet_bn", tolerance=1e-6)
    record = report["accuracy_control"]
    groups = len(json.loads((tmp_path / "autosearch_output" / "sensitivity.json").read_text())["groups"])
    assert record["proven"] and record["answer"] is None and "outside tolerance" in record["detail"]
    assert not any(s["within_tolerance"] for s in record["steps"])
    assert len(record["steps"]) <= 1 + math.ceil(math.log2(groups)) + 1  # quantized, the bisection, the whole ranking
    assert record["steps"][-1]["choice"] == f"top {groups}"
