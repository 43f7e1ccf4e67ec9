"""search.prune: wilcoxon with the real amd-quark on a zoo model: hopeless sampler trials stop sample by sample as
PRUNED, count toward the budget, save evaluation inferences (the report's cost section says how many), and every trial
that completes keeps the value a whole scoring gives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import needs_quark, qas
from .zoo import build

pytestmark = [pytest.mark.e2e, needs_quark]

EVAL_SAMPLES = 24


def test_pruned_trials_count_toward_the_budget_and_save_inferences(tmp_path: Path) -> None:
    zm = build("resnet_bn", tmp_path, eval_samples=EVAL_SAMPLES)
    # MinMax, Percentile and symmetric or not: some configurations are clearly worse on every sample
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=10, extra_yaml=(
        "search: {prune: wilcoxon, seed: 3, override: {activation_params: {calibration_method: [MinMax, Percentile], "
        "symmetric: [true, false]}}}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path).stdout)
    trials = report["all_trials"]
    pruned = [t for t in trials if t["state"] == "PRUNED"]
    complete = [t for t in trials if t["state"] == "COMPLETE"]
    assert pruned, f"no trial was pruned; values: {[t['value'] for t in complete]}"
    assert len(pruned) + len(complete) == 10 and report["budget_reached"] is True
    assert report["trials"]["pruned"] == len(pruned)

    cost = report["cost"]
    seen = [t["samples_seen"] for t in pruned]
    assert all(0 < n < EVAL_SAMPLES for n in seen), seen
    assert cost["pruned"] == len(pruned)
    assert cost["inferences_saved"] == sum(EVAL_SAMPLES - n for n in seen) > 0
    quantized = [t for t in trials if t["reused_from"] is None]
    assert cost["inferences"] == sum(EVAL_SAMPLES for t in quantized if t["state"] == "COMPLETE") + sum(seen)

    out = tmp_path / "autosearch_output"
    best = json.loads((out / "best_config.json").read_text())
    assert best["trial_number"] in {t["number"] for t in complete}
    assert not any((out / f"quantized_model_sampler_{t['number']}.onnx").exists() for t in pruned)
    assert "pruned" in qas("report", "autosearch_output", cwd=tmp_path).stdout

    # A resume: the plan adds what the study measured (its median trial), and pruned trials count as done
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=11, extra_yaml=(
        "search: {prune: wilcoxon, seed: 3, override: {activation_params: {calibration_method: [MinMax, Percentile], "
        "symmetric: [true, false]}}}\n"))
    validated = qas("validate", "spec.yaml", cwd=tmp_path, timeout=300)  # the plan before it runs says it too
    assert validated.returncode == 0 and "for the 1 left" in validated.stdout, validated.stdout[-3000:]
    resumed = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    measured = f"measured    {cost['quantizations']} trial(s) quantized so far, median "
    assert measured in resumed.stdout and "for the 1 left" in resumed.stdout, resumed.stdout[-3000:]


GENERATOR_EVALUATOR = '''\
"""Yields, per evaluation sample, minus the mean squared error of the model's output against the float model's."""
from pathlib import Path

import numpy as np
import onnxruntime
from quark.onnx.operators.custom_ops import get_library_path

HERE = Path(__file__).resolve().parent
FLOAT = {}


def outputs(model_path):
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(get_library_path("CPU"))
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for sample in sorted((HERE / "data/resnet_bn/eval").glob("*.npy")):
        yield sample.name, session.run(None, {name: np.load(sample)})[0]


def closeness(model_path):
    if not FLOAT:
        FLOAT.update(outputs(str(HERE / "models/resnet_bn.onnx")))
    for name, output in outputs(model_path):
        yield -float(np.mean((output - FLOAT[name]) ** 2))
'''


def test_a_generator_evaluator_is_pruned_sample_by_sample(tmp_path: Path) -> None:
    zm = build("resnet_bn", tmp_path, eval_samples=EVAL_SAMPLES)
    (tmp_path / "evals.py").write_text(GENERATOR_EVALUATOR)
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=10, extra_yaml=(
        "evaluation: {metric: null, data: null, evaluator: 'evals.py:closeness', higher_is_better: true}\n"
        "search: {prune: wilcoxon, seed: 3, override: {activation_params: {calibration_method: [MinMax, Percentile], "
        "symmetric: [true, false]}}}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path).stdout)
    pruned = [t for t in report["all_trials"] if t["state"] == "PRUNED"]
    assert pruned, [t["value"] for t in report["all_trials"]]
    assert all(0 < t["samples_seen"] < EVAL_SAMPLES for t in pruned)
    assert report["cost"]["inferences_saved"] > 0


def test_an_evaluator_alias_that_returns_one_score_stops_before_any_trial(tmp_path: Path) -> None:
    zm = build("resnet_bn", tmp_path)
    (tmp_path / "evals.py").write_text("def whole(path):\n    return 0.5\n\nscore = whole\n")
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=2, extra_yaml=(
        "evaluation: {metric: null, data: null, evaluator: 'evals.py:score', higher_is_better: true}\n"
        "search: {prune: wilcoxon}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "search.prune needs one score a sample" in said, said[-3000:]
    assert "Traceback" not in said and "trial 0" not in said


def test_under_tpe_a_pruned_search_draws_what_the_unpruned_one_draws(tmp_path: Path) -> None:
    """TPE learns from its best ceil(10 %) of the trials against the rest; pruning against the last of those (the 3rd
    best for 30 trials) prunes only trials TPE puts among the rest anyway, so the seeded search with the real Quark
    draws the same configurations, with and without pruning, and ends on the same best; pruning still saves
    inferences."""

    def search(prune: bool) -> dict:
        folder = tmp_path / ("on" if prune else "off")
        zm = build("resnet_bn", folder, eval_samples=32)
        zm.write_spec(folder, preset="A8W8_SEARCH", n_trials=30,
                      extra_yaml=f"search: {{sampler: TPE{', prune: wilcoxon' if prune else ''}}}\n")
        done = qas("run", "spec.yaml", "--yes", cwd=folder, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return json.loads(qas("report", "autosearch_output", "--format", "json", cwd=folder).stdout)

    unpruned, pruned = search(False), search(True)
    assert [t["config"] for t in pruned["all_trials"]] == [t["config"] for t in unpruned["all_trials"]]
    assert pruned["best"]["config"] == unpruned["best"]["config"]
    assert pruned["best"]["value"] == unpruned["best"]["value"]
    assert pruned["cost"]["pruned"] > 0 and pruned["cost"]["inferences"] < unpruned["cost"]["inferences"]
