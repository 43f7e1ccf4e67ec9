"""The rough time estimate: it includes the start-up, grows with the model, the samples and the iterations,
reads each fine-tuning group as Quark would, and cost_model.json says where each constant comes from."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from compiler import model, source
from compiler.cost import (DEFAULT_ITERATIONS, Finetune, constants, estimate, finetune_classes, finetune_s, plain_s,
                           startup_s, workload)
from compiler.facts import Facts, derive
from compiler.resources import load_data

from .conftest import EXAMPLE_DIR


def example_facts(**search: Any) -> Facts:
    """specs/example/spec.yaml's Facts (no pass run), with `search` keys replaced."""
    doc, found = source.load(EXAMPLE_DIR / "spec.yaml")
    assert doc is not None, found
    data = copy.deepcopy(doc.data)
    data["search"].update(search)
    return derive(model.build(data, EXAMPLE_DIR / "spec.yaml", doc.text))


def scaled(facts: Facts, mb: float | None = None, nodes: int | None = None, layers: int | None = None,
           samples: dict[str, int | None] | None = None) -> Facts:
    """The facts of a model of another size: model bytes, plain nodes and Conv layers replaced."""
    budget = dataclasses.replace(facts.budget, model_bytes=int(mb * 1e6)) if mb is not None else facts.budget
    counts = dict(facts.analysis["op_counts"])
    if layers is not None:
        counts["Conv"] = layers
    if nodes is not None:
        counts["Relu"] = nodes
    analysis = {**facts.analysis, "op_counts": counts}
    return dataclasses.replace(facts, budget=budget, analysis=analysis, samples=samples or facts.samples)


def test_the_total_holds_the_start_up_and_every_trial() -> None:
    facts = example_facts()
    t = estimate(facts)
    b = facts.budget
    assert t.startup_s >= constants()["startup_s"]
    assert set(t.per_trial_s) == {"plain", "adaround", "adaquant"} and t.iterations == {"adaround": 50, "adaquant": 50}
    low, high = t.total_s
    trials = b.grid_configs * t.per_trial_s["plain"] + b.effective_trials * max(t.per_trial_s.values())
    assert high == pytest.approx(t.startup_s + trials)
    assert t.startup_s < low < high  # the cheapest draw (10 iterations) still fine-tunes every sampler trial
    assert not t.samples_assumed


def test_the_estimate_grows_with_the_model_the_samples_and_the_iterations() -> None:
    base = example_facts()
    t0 = estimate(base)
    bigger = [scaled(base, mb=100), scaled(base, nodes=300), scaled(base, layers=50),
              scaled(base, samples={"calibration": 64, "evaluation": 64}),
              example_facts(override={"adaround_params": {"num_iterations": {"type": "int", "low": 10, "high": 5000}},
                                      "adaquant_params": {"num_iterations": [10, 5000]}})]
    for facts in bigger:
        t = estimate(facts)
        assert t.total_s[1] > t0.total_s[1]
        assert t.per_trial_s["adaround"] > t0.per_trial_s["adaround"]
    assert plain_s(workload(scaled(base, mb=500))) > plain_s(workload(base))


def test_a_user_reader_or_evaluator_uses_the_assumed_sample_count() -> None:
    facts = scaled(example_facts(), samples={"calibration": None})
    w = workload(facts)
    assert w.assumed and w.calibration == constants()["unknown_samples"]
    assert estimate(facts).samples_assumed


def test_the_start_up_counts_the_fine_tuning_warm_up_only_when_a_trial_can_fine_tune() -> None:
    w = workload(example_facts())
    warm_up = startup_s(w, finetunes=True) - startup_s(w, finetunes=False)
    assert warm_up == pytest.approx(constants()["finetune_warmup_s"])
    plain_only = estimate(example_facts(override={"algorithms": [None]}))
    assert set(plain_only.per_trial_s) == {"plain"}
    assert plain_only.total_s[0] == plain_only.total_s[1]


def test_a_gpu_shortens_the_trials_not_the_start_up() -> None:
    cpu = workload(example_facts())
    gpu = dataclasses.replace(cpu, gpu=True)
    assert finetune_s(gpu, "adaquant", 1000, 8) < finetune_s(cpu, "adaquant", 1000, 8)
    assert plain_s(gpu) < plain_s(cpu)
    assert startup_s(gpu, True) - startup_s(cpu, True) <= 0


def test_fine_tuning_groups_are_read_as_quark_reads_them() -> None:
    space = {"algorithms": ["adaround", "adaquant", None],
             "adaround_params": {"NumIterLR": [[100, 0.1], [4000, 0.01]], "only_if": {"algorithms": "adaround"}},
             "adaquant_params": {"data_size": [1000], "batch_size": {"type": "int", "low": 1, "high": 4},
                                 "only_if": {"algorithms": "adaquant"}}}
    assert finetune_classes(space) == {
        "adaround": Finetune(iterations=(100, 4000), data_size=10**9),
        "adaquant": Finetune(iterations=(DEFAULT_ITERATIONS["adaquant"],) * 2, data_size=1000)}
    assert finetune_classes({"algorithms": [None]}) == {}


def test_cost_model_json_says_where_each_constant_comes_from() -> None:
    data = load_data("cost_model.json")
    for name, entry in data.items():
        if name not in ("about", "measured"):
            assert entry["basis"].split(":")[0] in ("fitted", "assumed"), name
    # measured.fit: the run the constants were fitted to; measured.check: a later run set against them
    for run in ("fit", "check"):
        record = data["measured"][run]
        assert record["when"] and record["where"] and record["versions"]["amd-quark"], run
        assert len(record["models"]) >= 2, run
        for name, figures in record["models"].items():
            assert figures["model_mb"] > 0 and figures["load"], (run, name)
            for part, ratio in figures["ratio"].items():
                assert ratio == pytest.approx(figures["estimate_s"][part] / figures["actual_s"][part], rel=0.02)
    for name, figures in data["measured"]["fit"]["models"].items():
        assert 0.5 <= figures["ratio"]["total"] <= 2, name  # the target the constants were fitted for
