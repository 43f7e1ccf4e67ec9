"""Objectives without amd-quark: the recommended-winner rule on synthetic trials (ties, none within tolerance), the
Pareto front, the tolerance stop and the timeout on engine qas's trial loop (fake quantizer, several workers on one
study), multi-objective values and winner files, and the latency meter's record on the example model."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

from compiler.runtime import contract, objectives
from compiler.runtime.latency import LatencyMeter, model_size, readings, summary
from compiler.runtime.results import write_best
from compiler.runtime.search import Search
from compiler.runtime.space import stage_configs

from .conftest import REPO, FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)
TOLERANCE = {"value": 0.1, "relative": False}


def trial(number: int, *values: float, reused: bool = False) -> Any:
    attrs = {contract.ATTR_MODEL: f"m{number}.onnx", contract.ATTR_STAGE: "sampler"}
    if reused:
        attrs[contract.ATTR_REUSED_FROM] = 0
    made = create_trial(values=list(values), params={"x": 0.0}, distributions={"x": FloatDistribution(0, 1)},
                        user_attrs=attrs)
    made.number = number
    return made


def three(tmp_path: Path, **changes: Any) -> Any:
    return fake_settings(tmp_path, objectives=["accuracy", "latency", "size"], tolerance=TOLERANCE, two_stage=False,
                         **changes)


def test_the_fastest_within_tolerance_wins_and_near_ties_go_to_accuracy_then_size(tmp_path: Path) -> None:
    s = three(tmp_path)
    trials = [trial(0, 0.01, 10.0, 100), trial(1, 0.05, 5.0, 100), trial(2, 0.03, 5.2, 90), trial(3, 0.03, 5.1, 80),
              trial(4, 0.5, 1.0, 10)]  # 4 is the fastest but out of tolerance
    choice = objectives.choose(s, trials, objectives.bound(s, None))
    assert choice.winner.number == 3 and choice.within  # 1, 2, 3 tie within 5%; 2 and 3 more accurate; 3 smaller
    assert "fastest" in choice.reason and "3 trials tied" in choice.reason
    assert [t.number for t in objectives.ranking(s, trials, 0.1)] == [3, 2, 1, 0, 4]


def test_with_none_within_tolerance_the_most_accurate_wins_and_says_so(tmp_path: Path) -> None:
    s = three(tmp_path)
    trials = [trial(0, 0.3, 1.0, 10), trial(1, 0.2, 9.0, 10), trial(2, 0.2, 8.0, 5)]
    choice = objectives.choose(s, trials, 0.1)
    assert choice.winner.number == 2 and choice.within is False and "no trial is within tolerance" in choice.reason


def test_without_a_tolerance_the_most_accurate_wins_and_a_maximized_metric_turns_the_bound(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, objectives=["accuracy", "latency"])
    choice = objectives.choose(s, [trial(0, 0.2, 1.0), trial(1, 0.1, 9.0)], None)
    assert choice.winner.number == 1 and choice.within is None
    cos = fake_settings(tmp_path, metric="cos", direction="maximize", tolerance={"value": 0.02, "relative": False})
    assert objectives.bound(cos, None) == pytest.approx(0.98)
    assert objectives.is_within(cos, 0.99, 0.98) and not objectives.is_within(cos, 0.97, 0.98)
    relative = fake_settings(tmp_path, tolerance={"value": 0.01, "relative": True})
    assert objectives.bound(relative, 0.9) == pytest.approx(0.009) and objectives.bound(relative, None) is None


def test_a_trial_answered_from_the_study_never_beats_the_one_really_quantized(tmp_path: Path) -> None:
    s = three(tmp_path)
    assert objectives.choose(s, [trial(5, 0.01, 1.0, 1, reused=True), trial(7, 0.01, 1.0, 1)], 0.1).winner.number == 7


def test_the_pareto_front_keeps_the_non_dominated_trials_once(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, objectives=["accuracy", "latency"])
    trials = [trial(0, 0.1, 5.0), trial(1, 0.2, 2.0), trial(2, 0.2, 6.0), trial(3, 0.05, 9.0), trial(4, 0.1, 5.0, reused=True)]
    assert [t.number for t in objectives.pareto_front(s, trials)] == [0, 1, 3]


def test_the_tolerance_stop_needs_min_trials_a_trial_within_and_no_recent_improvement(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, tolerance=TOLERANCE, stop={"at_tolerance": True, "min_trials": 4, "patience": 2,
                                                         "margin": 0.1})
    flat = [trial(0, 0.3), trial(1, 0.05), trial(2, 0.2), trial(3, 0.3)]
    assert objectives.tolerance_stop(s, flat[:3], 0.1, None) is None  # fewer than min_trials
    assert "within tolerance" in objectives.tolerance_stop(s, flat, 0.1, None)
    improving = flat[:3] + [trial(3, 0.02)]  # 0.03 better than 0.05: more than 0.1 x the tolerance (0.01)
    assert objectives.tolerance_stop(s, improving, 0.1, None) is None
    small = flat[:3] + [trial(3, 0.045)]  # 0.005 better: within the margin, so no real improvement
    assert objectives.tolerance_stop(s, small, 0.1, None) is not None
    none_within = [trial(n, 0.3) for n in range(6)]
    assert objectives.tolerance_stop(s, none_within, 0.1, None) is None


class Timed(FakeQuark):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def quantize(self, config: dict[str, Any], output: Path) -> None:
        time.sleep(self.delay)
        super().quantize(config, output)


def fake_latency(model: Path) -> dict[str, Any]:
    config = json.loads(model.read_text())
    median = {"XInt8Spec": 1.0, "Int8Spec": 1.5, "Int16Spec": 3.0}[config["activation"]]
    return {"median_ms": median, "p25_ms": median, "p75_ms": median, "readings": 10,
            "provider": "CPUExecutionProvider", "threads": 1}


def run(s: Any, fake: FakeQuark, measure: Any = None) -> tuple[Search, int | None]:
    search = Search(s)
    search.attach(fake.quantize, fake.score, measure)
    return search, search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs))


def test_the_tolerance_stop_ends_the_loop_early_and_counts_as_the_end_of_the_search(tmp_path: Path) -> None:
    stop = {"at_tolerance": True, "min_trials": 3, "patience": 2, "margin": 0.02}
    s = fake_settings(tmp_path, two_stage=False, sampler="Random", n_trials=30, tolerance={"value": 0.25,
                                                                                            "relative": False}, stop=stop)
    search, code = run(s, FakeQuark())
    done = search.complete(search.sampler_study)
    assert code is None and 3 <= len(done) < 30
    record = search.sampler_study.user_attrs[contract.STOPPED_ATTR]
    assert record["reason"] == "tolerance" and record["at"]
    assert search.budget_reached() and all(contract.ATTR_WITHIN_TOLERANCE in t.user_attrs for t in done)
    best = write_best(search)
    assert best["stopped"]["reason"] == "tolerance" and best["tolerance"]["met"] is True
    again = FakeQuark()  # a re-run (or another worker) claims nothing once the search stopped
    _, code = run(s, again)
    assert code is None and again.quantized == []


def test_the_timeout_stops_every_worker_from_claiming_and_never_stops_a_trial_in_flight(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, two_stage=False, sampler="Random", n_trials=30, stop={"timeout": 0.3})
    first = Search(s)
    second = Search(s, worker_index=1, joining=True)
    fake = Timed(0.12)
    for search in (first, second):
        search.attach(fake.quantize, fake.score)
    configs = stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs)
    started = first.sampler_study.user_attrs.get(contract.STARTED_ATTR)
    assert started is None
    while first.step(configs) != "done":
        pass
    done = len(first.complete(first.sampler_study))
    assert 1 <= done < 30 and first.sampler_study.user_attrs[contract.STOPPED_ATTR]["reason"] == "timeout"
    assert not first.trials("RUNNING") and not first.trials("FAIL")  # the trial in flight finished
    assert second.step(configs) == "done" and len(first.complete(first.sampler_study)) == done
    assert second.budget_reached() and write_best(second)["stopped"]["reason"] == "timeout"


def test_latency_and_size_objectives_make_a_multi_objective_study_and_the_winner_files(tmp_path: Path) -> None:
    s = three(tmp_path, sampler="TPE", n_trials=8)
    search, code = run(s, FakeQuark(), fake_latency)
    assert code is None and search.sampler_study._is_multi_objective()
    for t in search.complete(search.sampler_study):
        assert len(t.values) == 3 and t.user_attrs[contract.ATTR_LATENCY]["median_ms"] == t.values[1]
        assert t.values[2] == t.user_attrs[contract.ATTR_SIZE] > 0
    best = write_best(search)
    assert best["why"] and best["runner_up"]["trial_number"] != best["trial_number"]
    assert set(best["values"]) == {"accuracy", "latency", "size"} and best["value"] == best["values"]["accuracy"]
    pareto = json.loads((tmp_path / contract.PARETO_FILE).read_text())
    assert pareto["winner"] == best["trial_number"] and pareto["front"]
    assert (tmp_path / contract.BEST_MODEL_FILE).read_text() == (tmp_path / best["model"]).read_text()
    chosen = objectives.choose(s, search.trials("COMPLETE"), 0.1).winner
    assert chosen.number == best["trial_number"]


def test_latency_readings_follow_warmup_and_enough_passes_with_a_fake_clock() -> None:
    ticks = iter(range(10_000))
    calls: list[int] = []
    times = readings(lambda: calls.append(1) or 4, clock=lambda: next(ticks) / 1000)
    assert len(times) >= 10 and len(calls) == len(times) + 2 and all(t == pytest.approx(0.25) for t in times)
    record = summary([3.0, 1.0, 2.0], "CPUExecutionProvider", 1)
    assert record["median_ms"] == 2.0 and record["p25_ms"] <= 2.0 <= record["p75_ms"] and record["readings"] == 3


def test_the_latency_meter_measures_the_example_model_with_a_stable_median() -> None:
    import numpy as np

    model = REPO / "specs/example/models/tinycnn.onnx"
    import onnx

    name = onnx.load(str(model)).graph.input[0].name
    feeds = [{name: np.load(p)} for p in sorted((REPO / "specs/example/data/eval").glob("*.npy"))[:4]]
    meter = LatencyMeter(feeds, "cpu")
    first, second = meter(model), meter(model)
    for record in (first, second):
        assert record["provider"] == "CPUExecutionProvider" and record["threads"] == 1 and record["readings"] >= 10
        assert 0 < record["min_ms"] <= record["p25_ms"] <= record["median_ms"] <= record["p75_ms"] <= record["max_ms"]
    assert 0.2 < first["median_ms"] / second["median_ms"] < 5  # the same model measures alike (loose: a busy host)
    assert model_size(model) == model.stat().st_size
