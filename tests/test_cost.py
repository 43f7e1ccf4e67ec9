"""The rough time estimate: it includes the start-up, grows with the model, the samples and the iterations,
reads each fine-tuning group as Quark would, and cost_model.json says where each constant comes from."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from compiler.back.cost import (
    DEFAULT_ITERATIONS,
    Finetune,
    constants,
    distinct_draws,
    estimate,
    finetune_classes,
    finetune_s,
    parallelism,
    per_sample,
    plain_s,
    sensitivity_s,
    startup_s,
    workload,
)
from compiler.back.facts import Facts, derive
from compiler.check.budget_facts import quantized_model_bytes, weight_bits
from compiler.front import model, source
from compiler.resources import load_data

from .conftest import EXAMPLE_DIR


def example_facts(top: dict[str, Any] | None = None, **search: Any) -> Facts:
    """specs/example/spec.yaml's Facts (no pass run), with `search` keys and `top` top-level keys replaced."""
    doc, found = source.load(EXAMPLE_DIR / "spec.yaml")
    assert doc is not None, found
    data = copy.deepcopy(doc.data)
    data["search"].update(search)
    data.update(top or {})
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
    assert t.sensitivity_s == 0 and t.parallelism == 1 and t.new_trials == (3, 3)  # continuous ranges: no repeats
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
        "adaquant": Finetune(iterations=(DEFAULT_ITERATIONS["adaquant"],) * 2, data_size=1000, batch=4)}
    assert finetune_classes({"algorithms": [None]}) == {}


def test_cost_model_json_says_where_each_constant_comes_from() -> None:
    data = load_data("cost_model.json")
    for name, entry in data.items():
        if name not in ("about", "measured"):
            assert entry["basis"].split(":")[0] in ("fitted", "measured", "assumed"), name
    # measured.fit: the run the constants were fitted to, estimate and actual measured side by side per model
    record = data["measured"]["fit"]
    assert record["when"] and record["where"] and record["versions"]["amd-quark"]
    assert len(record["models"]) >= 3
    for name, figures in record["models"].items():
        assert figures["model_mb"] > 0 and figures["load"], name
        assert figures["trials"]["fine-tuned"], name  # the fit covers AdaRound/AdaQuant trials
        for part, ratio in figures["ratio"].items():
            assert ratio == pytest.approx(figures["estimate_s"][part] / figures["actual_s"][part], rel=0.02)
            assert 0.5 <= ratio <= 2, (name, part)  # the target the constants were fitted for: within 2x


def unit_constants(**changes: Any) -> dict[str, Any]:
    """cost_model.json's constants with `changes` merged into their entries (a formula's terms isolated)."""
    c = copy.deepcopy(constants())
    c["run_factor"] = {"plain": 1.0, "finetune": 1.0}
    for name, value in changes.items():
        c[name] = {**c[name], **value} if isinstance(value, dict) else value
    return c


def test_fine_tuning_scales_with_iterations_times_layers() -> None:
    # only the per-layer per-iteration term: the cost is iterations x layers x that constant
    c = unit_constants(finetune_layer_s={"fixed": 0.0, "per_forward": 0.0},
                       adaquant={"s_per_layer_iteration": 0.01, "s_per_mb_sample_iteration": 0.0,
                                 "s_per_mb_melem_sample_iteration": 0.0})
    w = workload(scaled(example_facts(), layers=10))
    assert finetune_s(w, "adaquant", 100, 8, c) == pytest.approx(100 * (w.layers) * 0.01)
    assert finetune_s(w, "adaquant", 300, 8, c) == pytest.approx(3 * finetune_s(w, "adaquant", 100, 8, c))
    w2 = workload(scaled(example_facts(), layers=20))
    assert w2.layers - w.layers == 10
    assert finetune_s(w2, "adaquant", 100, 8, c) == pytest.approx(100 * w2.layers * 0.01)
    # with the committed constants: linear in the iterations, and more layers cost more per iteration
    step = finetune_s(w, "adaround", 2000, 8) - finetune_s(w, "adaround", 1000, 8)
    assert finetune_s(w, "adaround", 3000, 8) - finetune_s(w, "adaround", 2000, 8) == pytest.approx(step)
    assert finetune_s(w2, "adaround", 2000, 8) - finetune_s(w2, "adaround", 1000, 8) > step


def test_fine_tuning_collects_one_forward_pass_per_layer_and_sample_and_steps_per_batch_sample() -> None:
    c = unit_constants(finetune_layer_s={"fixed": 0.0, "per_forward": 1.0},
                       adaquant={"s_per_layer_iteration": 0.0, "s_per_mb_sample_iteration": 0.5,
                                 "s_per_mb_melem_sample_iteration": 2.0})
    w = workload(scaled(example_facts(), mb=10, layers=10))
    forward = per_sample(c["evaluation_s_per_sample"], w)
    collect = w.layers * min(8, w.calibration) * forward
    assert finetune_s(w, "adaquant", 0, 8, c) == pytest.approx(collect)
    assert finetune_s(w, "adaquant", 0, 1000, c) == pytest.approx(w.layers * w.calibration * forward)  # data capped
    per_iteration = 10 * (0.5 + 2.0 * w.input_melems)
    assert finetune_s(w, "adaquant", 10, 8, c, batch=2) == pytest.approx(collect + 10 * 2 * per_iteration)
    # a bigger input (a detector's resolution) costs more per iteration at the same weights
    bigger = dataclasses.replace(w, input_melems=w.input_melems * 10)
    assert finetune_s(bigger, "adaquant", 10, 8, c) > finetune_s(w, "adaquant", 10, 8, c)


def test_the_sensitivity_stage_counts_only_when_keep_float_searches() -> None:
    ranked_only = estimate(example_facts(top={"keep_float": {"sensitivity": {"samples": 4}}}))
    assert ranked_only.sensitivity_s == 0  # qas sensitivity ranks; the search script does not
    facts = example_facts(top={"keep_float": {"sensitivity": {"samples": 4}, "search": {"top_k": [0, 1, 2]}}})
    t = estimate(facts)
    w = workload(facts)
    assert w.quantized_nodes == sum(facts.analysis["quantizable_op_counts"].values()) > 0
    assert t.sensitivity_s == pytest.approx(sensitivity_s(w, 4))
    candidate = (constants()["sensitivity_candidate_s"]["fixed"] + constants()["sensitivity_candidate_s"]["per_node"]
                 * w.nodes + min(4, w.evaluation) * per_sample(constants()["evaluation_s_per_sample"], w))
    assert t.sensitivity_s == pytest.approx(plain_s(w) + (w.quantized_nodes + 2) * candidate)
    plain = estimate(example_facts())
    assert t.total_s[0] - plain.total_s[0] == pytest.approx(t.sensitivity_s, rel=0.02)


def test_workers_divide_the_trial_phase_by_the_trials_they_run_at_once() -> None:
    one, two = estimate(example_facts()), estimate(example_facts(workers=2))
    efficiency = constants()["workers"]["efficiency"]
    assert two.parallelism == pytest.approx(1 + efficiency) and one.parallelism == 1
    for i in (0, 1):
        phase_one = one.total_s[i] - one.startup_s if i else one.total_s[i] - startup_s(workload(example_facts()), True)
        phase_two = two.total_s[i] - two.startup_s if i else two.total_s[i] - startup_s(workload(example_facts()), True)
        assert phase_two == pytest.approx(phase_one / two.parallelism)
    assert parallelism(8, 2) == parallelism(2, 2) < parallelism(8, 8)  # no more at once than there are trials
    assert parallelism(1, 100) == 1


def test_repeats_answered_from_the_study_cost_nothing() -> None:
    assert distinct_draws(10, float("inf")) == 10
    assert distinct_draws(10, 3) == pytest.approx(3 * (1 - (2 / 3) ** 10))
    assert distinct_draws(1, 5) == pytest.approx(1)
    # a plain space of 6 configurations (CLE with 2 step counts or none, x 2 weight symmetries) drawn 6 times: ~4 new
    facts = example_facts(override={"algorithms": [None], "adaround_params": None, "adaquant_params": None,
                                    "cle_algo": ["cle", None], "weight_params": {"symmetric": [True, False]}},
                          two_stage=False, n_trials=6)
    assert facts.budget.distinct_configs == 6 and facts.budget.effective_trials == 6
    t = estimate(facts)
    assert t.new_trials[0] == pytest.approx(distinct_draws(6, 6), abs=0.01) and t.new_trials[1] == 6
    assert t.total_s[0] == pytest.approx(t.startup_s + distinct_draws(6, 6) * t.per_trial_s["plain"])


def test_disk_counts_each_model_at_its_quantized_size() -> None:
    per_node = constants()["quantized_size"]["qdq_bytes_per_node"]
    assert quantized_model_bytes(4_000_000, 8, 10) == 1_000_000 + int(10 * per_node)
    assert quantized_model_bytes(4_000_000, 16, 10) == 2_000_000 + int(10 * per_node)
    assert weight_bits({"weight": ["XInt8Spec"]}) == 8
    assert weight_bits({"weight": ["Int8Spec", "Int16Spec"]}) == 16  # the widest a trial can draw
    assert weight_bits({"weight": ["Int8Spec"],
                        "weight_params": {"data_type": ["BFloat16"], "only_if": "weight"}}) == 16
    assert weight_bits({"weight": ["SomethingNew"]}) == 32
    facts = example_facts()
    b = facts.budget
    assert b.quantized_bytes == quantized_model_bytes(b.model_bytes, 8,
                                                      sum(facts.analysis["quantizable_op_counts"].values()))
    assert b.quantized_bytes < b.model_bytes / 2
