"""Objectives without amd-quark: the recommended-winner rule on synthetic trials (ties from the measured spread, none
within tolerance), the Pareto front, the tolerance stop and the timeout on engine qas's trial loop (fake quantizer,
several workers on one study), multi-objective values, winner files and plots, a repeated configuration never the
runner-up, the latency meter's stability under load (fake clock) and its record on the example model."""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

from compiler.runtime import contract, latency, objectives
from compiler.runtime.latency import LatencyMeter, model_size
from compiler.runtime.results import write_best, write_plots
from compiler.runtime.search import Search
from compiler.runtime.space import stage_configs

from .conftest import REPO, FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)
TOLERANCE = {"value": 0.1, "relative": False}


def trial(number: int, *values: float, reused: bool = False, spread: float | None = None) -> Any:
    attrs: dict[str, Any] = {contract.ATTR_MODEL: f"m{number}.onnx", contract.ATTR_STAGE: "sampler"}
    if reused:  # answered from the study: trial 0's model and values
        attrs[contract.ATTR_REUSED_FROM], attrs[contract.ATTR_MODEL] = 0, "m0.onnx"
    if spread is not None:  # a latency record: the figure (the trial's second value) and its measured spread
        attrs[contract.ATTR_LATENCY] = {"median_ms": values[1], "spread_ms": spread}
    made = create_trial(values=list(values), params={"x": 0.0}, distributions={"x": FloatDistribution(0, 1)},
                        user_attrs=attrs)
    made.number = number
    return made


def three(tmp_path: Path, **changes: Any) -> Any:
    return fake_settings(tmp_path, **{"objectives": ["accuracy", "latency", "size"], "tolerance": TOLERANCE,
                                      "two_stage": False, **changes})


def test_the_fastest_within_tolerance_wins_and_near_ties_go_to_accuracy_then_size(tmp_path: Path) -> None:
    s = three(tmp_path)
    trials = [trial(0, 0.01, 10.0, 100, spread=0.15), trial(1, 0.05, 5.0, 100, spread=0.15),
              trial(2, 0.03, 5.2, 90, spread=0.15), trial(3, 0.03, 5.1, 80, spread=0.15),
              trial(4, 0.5, 1.0, 10, spread=0.15)]  # 4 is the fastest but out of tolerance
    choice = objectives.choose(s, trials, objectives.bound(s, None))
    assert choice.winner.number == 3 and choice.within  # 1, 2, 3 tie within their spreads; 3 accurate and smaller
    assert "fastest" in choice.reason and "3 configurations tied within their measured latency spread" in choice.reason
    assert [t.number for t in objectives.ranking(s, trials, 0.1)] == [3, 2, 1, 0, 4]


def test_latency_ties_come_from_the_measured_spread_not_a_fixed_percentage(tmp_path: Path) -> None:
    s = three(tmp_path)
    # a 15 % lead inside a noisy measurement (spreads overlap) is a tie: the 5 points more accurate trial wins
    noisy = [trial(0, 0.05, 2.0, 100, spread=0.3), trial(1, 0.0, 2.3, 100, spread=0.3)]
    assert objectives.choose(s, noisy, 0.1).winner.number == 1
    # a 3 % lead measured precisely (spreads apart) is real: the faster trial wins
    precise = [trial(0, 0.05, 2.0, 100, spread=0.01), trial(1, 0.0, 2.06, 100, spread=0.01)]
    choice = objectives.choose(s, precise, 0.1)
    assert choice.winner.number == 0 and "tied" not in choice.reason
    assert "spreads overlap" in objectives.rule_text(s) and "5%" not in objectives.rule_text(s)


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
    trials = [trial(0, 0.1, 5.0), trial(1, 0.2, 2.0), trial(2, 0.2, 6.0), trial(3, 0.05, 9.0),
              trial(4, 0.1, 5.0, reused=True)]
    assert [t.number for t, _ in objectives.pareto_front(s, trials)] == [0, 1, 3]


def test_the_tolerance_stop_needs_min_trials_a_trial_within_and_no_recent_improvement(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, tolerance=TOLERANCE, stop={"at_tolerance": True, "min_trials": 4, "patience": 2,
                                                         "margin": 0.1})
    flat = [trial(0, 0.3), trial(1, 0.05), trial(2, 0.2), trial(3, 0.3)]
    assert objectives.tolerance_stop(s, flat[:3], 0.1, None) is None  # fewer than min_trials
    assert "within tolerance" in objectives.tolerance_stop(s, flat, 0.1, None)
    improving = [*flat[:3], trial(3, 0.02)]  # 0.03 better than 0.05: more than 0.1 x the tolerance (0.01)
    assert objectives.tolerance_stop(s, improving, 0.1, None) is None
    small = [*flat[:3], trial(3, 0.045)]  # 0.005 better: within the margin, so no real improvement
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
    s = fake_settings(tmp_path, two_stage=False, sampler="Random", n_trials=30,
                      tolerance={"value": 0.25, "relative": False}, stop=stop)
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


def test_plots_of_a_multi_objective_search_one_history_an_objective_and_the_pareto_front(tmp_path: Path) -> None:
    s = three(tmp_path, sampler="TPE", n_trials=4, plots=True)
    search, _ = run(s, FakeQuark(), fake_latency)
    paths = write_plots(search)  # crashed: plot_optimization_history without a target on a multi-objective study
    assert [p.name for p in paths] == ["optimization_history.html", "optimization_history_latency.html",
                                       "optimization_history_size.html", "pareto_front.html"]
    assert "L2" in paths[0].read_text() and "latency (ms per sample)" in paths[1].read_text()
    assert "size (bytes)" in paths[2].read_text() and "size (MB)" in paths[3].read_text()
    assert (tmp_path / "report" / "plotly.min.js").is_file() and all(p.stat().st_size < 200_000 for p in paths)


FLOAT_MS = 0.5


def measured(model: Path) -> dict[str, Any]:
    """fake_latency's figure as the meter records it, against a FLOAT_MS float model (the same ratio every round)."""
    record = fake_latency(model)
    ratio = record["median_ms"] / FLOAT_MS
    return {**record, "ratio": ratio, "ratio_range": [ratio, ratio], "spread_ms": 0.0, "method": latency.METHOD}


def test_a_repeated_configuration_is_never_the_runner_up_and_a_slower_winner_is_said_plainly(tmp_path: Path) -> None:
    two = {"activation": ["XInt8Spec", "Int16Spec"], "cle_algo": ["cle"]}  # two configurations, six trials
    s = three(tmp_path, sampler="Random", n_trials=6, search_space=two, tolerance={"value": 0.5, "relative": False})
    search = Search(s)
    search.record_float_objectives({"median_ms": FLOAT_MS, "spread_ms": 0.0, "provider": "CPUExecutionProvider"}, None)
    search.attach(FakeQuark().quantize, FakeQuark().score, measured)
    search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs))
    done = search.trials("COMPLETE")
    reused = [t for t in done if contract.ATTR_REUSED_FROM in t.user_attrs]
    best = write_best(search)
    winner = next(t for t in done if t.number == best["trial_number"])
    repeats = sorted(t.number for t in reused if t.user_attrs[contract.ATTR_MODEL] == best["model"])
    assert repeats, "the winner's configuration must have been repeated for this test to mean anything"
    assert contract.ATTR_REUSED_FROM not in winner.user_attrs and best["repeated_by"] == repeats
    runner_up = best["runner_up"]
    assert runner_up["config"] != best["config"] and runner_up["model"] != best["model"]  # another configuration
    assert contract.ATTR_REUSED_FROM not in search.sampler_study.trials[runner_up["trial_number"]].user_attrs
    front = json.loads((tmp_path / contract.PARETO_FILE).read_text())["front"]
    assert len({json.dumps(p["config"], sort_keys=True) for p in front}) == len(front)
    # XInt8 at 1 ms against the float model's 0.5 ms: the winner is twice as slow, and why says so plainly
    assert "SLOWER than the float model: 2.00x the float model's latency" in best["why"]


class LoadedClock:
    """A fake clock on a machine whose load (a factor on every run's time) drifts as the test says."""

    def __init__(self, load: Any) -> None:
        self.now, self.load, self.noise = 0.0, load, random.Random(0)

    def __call__(self) -> float:
        return self.now

    def spend(self, ms: float) -> None:
        self.now += ms / 1000.0 * self.load(self.now) * self.noise.uniform(0.97, 1.03)


class FakeSession:
    def __init__(self, clock: LoadedClock, ms: float) -> None:
        self.clock, self.ms = clock, ms

    def run(self, outputs: Any, feed: Any) -> None:
        self.clock.spend(self.ms)

    def get_providers(self) -> list[str]:
        return ["CPUExecutionProvider"]


BASE_MS = {"float.onnx": 0.86, "quantized.onnx": 2.1}  # the CPU: every quantized model 2.0-2.2 ms


class FakeMeter(LatencyMeter):
    def session(self, model_path: Path) -> Any:
        return FakeSession(self.clock, BASE_MS[model_path.name])


def one_model(session: FakeSession, feeds: list[Any]) -> Any:
    """The old way: a pass of the candidate alone (its median over passes was the trial's latency)."""
    def run_pass() -> int:
        for feed in feeds:
            session.run(None, feed)
        return len(feeds)

    return run_pass


def test_interleaved_latency_is_stable_under_load_where_the_absolute_median_is_not() -> None:
    feeds = [{"x": None}] * 4
    loads = {"quiet": lambda now: 1.0, "busy": lambda now: 2.3,  # another job started: every run 2.3x slower
             "drifting": lambda now: 1.0 + now}  # the load grows during the measurement
    figures, alone = {}, {}
    for name, load in loads.items():
        clock = LoadedClock(load)
        meter = FakeMeter(feeds, "cpu", reference_model=Path("float.onnx"), clock=clock)
        meter.reference_ms = 0.86  # the float model's figure, measured once per study
        record = meter(Path("quantized.onnx"))
        figures[name] = record["median_ms"]
        assert record["rounds"] == latency.ROUNDS and record["readings"] >= latency.ROUNDS * latency.MIN_PASSES
        assert record["method"] == latency.METHOD and 0 <= record["spread_ms"] < 0.1 * record["median_ms"]
        assert record["ratio_range"][0] <= record["ratio"] <= record["ratio_range"][1]
        alone[name] = statistics.median(latency.timed_passes(one_model(FakeSession(clock, 2.1), feeds), clock))
    for name, figure in figures.items():
        assert figure == pytest.approx(2.1, rel=0.03), (name, figure)  # load cancels out of the ratio
    assert max(alone.values()) / min(alone.values()) > 2  # timed alone, the same model "got" 2x slower


def test_the_float_reference_is_the_least_loaded_round_and_a_slower_model_is_called_slower() -> None:
    clock = LoadedClock(lambda now: 3.0 if 0.2 < now < 0.6 else 1.0)  # a burst of load in the middle
    meter = FakeMeter([{"x": None}] * 4, "cpu", reference_model=Path("float.onnx"), clock=clock)
    record = meter.reference()
    assert record["median_ms"] == pytest.approx(0.86, rel=0.03) and record["rounds"] == latency.ROUNDS
    assert max(record["round_medians_ms"]) > 2 * record["median_ms"]  # the burst is in the record, not the figure
    meter.reference_ms = record["median_ms"]
    slower = meter(Path("quantized.onnx"))
    assert objectives.verdict(slower, record) == "slower"
    assert "SLOWER than the float model" in objectives.versus_float(slower, record)
    assert objectives.verdict({**slower, "ratio": 0.5, "ratio_range": [0.45, 0.55]}, record) is None
    assert objectives.verdict({**slower, "ratio": 0.97, "ratio_range": [0.9, 1.04]}, record) == "not faster"


def test_the_latency_meter_measures_the_example_model_against_itself() -> None:
    import numpy as np
    import onnx

    model = REPO / "specs/example/models/tinycnn.onnx"
    name = onnx.load(str(model)).graph.input[0].name
    feeds = [{name: np.load(p)} for p in sorted((REPO / "specs/example/data/eval").glob("*.npy"))[:4]]
    meter = LatencyMeter(feeds, "cpu", reference_model=model)
    reference = meter.reference()
    meter.reference_ms = reference["median_ms"]
    record = meter(model)  # the float model interleaved with itself
    assert reference["provider"] == record["provider"] == "CPUExecutionProvider" and record["threads"] == 1
    assert record["rounds"] == latency.ROUNDS and record["readings"] >= latency.ROUNDS * latency.MIN_PASSES
    assert 0.5 < record["ratio"] < 2 and record["median_ms"] > 0  # loose: a busy host; exactness is the fake's test
    assert model_size(model) == model.stat().st_size
