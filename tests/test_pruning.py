"""search.prune's parts: the hardest-first order, the per-sample watch (reports each value, prunes only while samples
remain), and Scorer.score_by_sample, which must give the value Scorer.score gives, to the last bit, in any order."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from compiler.runtime.pruning import SampleWatch, hardest_first, make_pruner, reference_rank
from compiler.runtime.readers import SampleList

from .conftest import EXAMPLE_DIR, needs_quark


class FakeTrial:
    def __init__(self, prune_after: int | None) -> None:
        self.reported: list[tuple[float, int]] = []
        self.prune_after = prune_after

    def report(self, value: float, step: int) -> None:
        self.reported.append((value, step))

    def should_prune(self) -> bool:
        return self.prune_after is not None and len(self.reported) >= self.prune_after


def test_hardest_first_puts_the_worst_samples_first_for_either_direction() -> None:
    values = {0: 0.1, 1: 0.5, 2: 0.3, 3: math.inf}
    assert hardest_first(values, "minimize") == [1, 2, 0, 3]  # infinity: psnr of an exact sample, the best
    assert hardest_first({0: 0.9, 1: 0.2, 2: 0.5, 3: math.inf}, "maximize") == [1, 2, 0, 3]
    assert hardest_first({0: 0.2, 1: 0.2}, "minimize") == [0, 1]  # ties keep the reader's order


def test_the_watch_reports_every_finite_value_and_prunes_only_while_samples_remain() -> None:
    trial = FakeTrial(prune_after=2)
    watch = SampleWatch(trial, None)
    watch(4, 0.5, 2)
    watch(1, math.nan, 1)  # not reported: nothing to compare
    with pytest.raises(optuna.TrialPruned, match="on 3 evaluation sample"):
        watch(0, 0.7, 1)
    assert trial.reported == [(0.5, 4), (0.7, 0)] and watch.seen == 3

    last = SampleWatch(FakeTrial(prune_after=1), None)
    last(0, 0.9, 0)  # the last sample: the value is known, so the trial completes
    assert last.seen == 1


def test_the_pruner_is_optunas_wilcoxon_and_only_with_search_prune() -> None:
    assert make_pruner(None, "TPE", 50) is None
    assert isinstance(make_pruner("wilcoxon", "TPE", 50), optuna.pruners.WilcoxonPruner)
    assert make_pruner("wilcoxon", "TPE", 50).rank == 5 and make_pruner("wilcoxon", "Random", 50).rank == 1


@pytest.mark.parametrize("n_trials", [1, 9, 10, 11, 50, 249, 250, 251, 1000])
def test_the_reference_rank_under_tpe_is_the_size_of_its_best_part(n_trials: int) -> None:
    from optuna.samplers._tpe.sampler import default_gamma  # what TPESampler() splits with

    assert reference_rank("TPE", n_trials) == default_gamma(n_trials)


def per_sample(study: optuna.Study, values: list[float]) -> optuna.trial.Trial:
    trial = study.ask()
    for index, value in enumerate(values):
        trial.report(value, index)
    return trial


def test_a_trial_is_compared_with_the_reference_ranks_trial_not_the_best() -> None:
    rng = np.random.default_rng(3)
    noise = list(rng.normal(0.0, 0.01, 12))
    study = optuna.create_study(pruner=make_pruner("wilcoxon", "TPE", 20))  # rank 2
    for level in (0.1, 0.5, 0.9):  # the best, the reference, a worse one
        values = [level + n for n in noise]
        study.tell(per_sample(study, values), sum(values) / len(values))
    assert not per_sample(study, [0.3 + n for n in noise]).should_prune()  # worse than the best only
    assert per_sample(study, [0.7 + n for n in noise]).should_prune()  # worse than the reference
    assert per_sample(optuna.create_study(pruner=make_pruner("wilcoxon", "Random", 20)),
                      [0.3 + n for n in noise]).should_prune() is False  # no complete trial yet: nothing to compare


def test_a_repeat_at_the_reference_rank_stands_for_the_trial_it_repeats() -> None:
    from compiler.runtime import contract
    from compiler.runtime.pruning import _Ranked

    study = optuna.create_study()
    numbers = {}
    for name, level in (("best", 0.1), ("second", 0.5)):
        trial = per_sample(study, [level] * 4)
        study.tell(trial, level)
        numbers[name] = trial.number
    repeat = study.ask()  # answered from the study: the value, no per-sample values
    repeat.set_user_attr(contract.ATTR_REUSED_FROM, numbers["second"])
    study.tell(repeat, 0.5)
    worse = per_sample(study, [0.9] * 4)
    study.tell(worse, 0.9)
    assert _Ranked(study, 3).best_trial.number == numbers["second"]  # not the worse trial after the repeat
    assert _Ranked(study, 4).best_trial.number == worse.number
    with pytest.raises(ValueError, match="5th best"):
        _Ranked(study, 5).best_trial  # noqa: B018 - the property raises


def tpe_search(pruner: Any, trials: int = 40) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """A seeded TPE search of a per-sample objective (20 samples, each with its own offset), pruned sample by sample
    as qas does; the parameters drawn, the best parameters and the samples scored out."""
    offsets = np.random.default_rng(11).normal(0.0, 0.3, 20)
    scored = 0

    def objective(trial: optuna.Trial) -> float:
        nonlocal scored
        x, y = trial.suggest_float("x", -3, 3), trial.suggest_categorical("y", ["a", "b", "c"])
        base = (x - 1.0) ** 2 + {"a": 0.0, "b": 0.4, "c": 1.0}[y]
        values = []
        for index, offset in enumerate(offsets):
            values.append(base * (1.0 + 0.1 * offset) + offset)
            scored += 1
            trial.report(values[-1], index)
            if index < len(offsets) - 1 and trial.should_prune():
                raise optuna.TrialPruned()
        return float(np.mean(values))

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0), pruner=pruner)
    study.optimize(objective, n_trials=trials)
    return [t.params for t in study.trials], study.best_params, scored


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_pruning_against_tpes_reference_draws_what_tpe_draws_without_pruning() -> None:
    unpruned, best, scored = tpe_search(optuna.pruners.NopPruner())
    drawn, pruned_best, pruned_scored = tpe_search(make_pruner("wilcoxon", "TPE", 40))
    assert drawn == unpruned and pruned_best == best
    assert pruned_scored < 0.6 * scored  # and it still prunes (384 of 800 samples scored)
    against_best, _, _ = tpe_search(optuna.pruners.WilcoxonPruner(p_threshold=0.1))
    assert against_best != unpruned  # what the reference rank is for


class Recorder:
    """A watch that records what it is told and never prunes."""

    def __init__(self, order: list[int] | None) -> None:
        self.order = order
        self.told: list[tuple[int, float, int]] = []

    def __call__(self, index: int, value: float, remaining: int) -> None:
        self.told.append((index, value, remaining))


def example_samples(count: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    return [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(count)]


def reader(samples: list[dict[str, Any]]) -> Any:
    """Quark's CachedDataReader over the samples, as the search wraps its readers."""
    from quark.onnx.calibration import CachedDataReader

    found = SampleList()
    found.samples = samples
    return CachedDataReader(found)


@pytest.mark.e2e
@needs_quark
@pytest.mark.parametrize("metric", ["L2", "cos", "top1"])
def test_scoring_sample_by_sample_gives_the_whole_scores_value_in_any_order(metric: str, tmp_path: Path) -> None:
    import onnx

    from compiler.runtime.scoring import Scorer

    float_model = EXAMPLE_DIR / "models" / "tinycnn.onnx"
    name = onnx.load(str(float_model)).graph.input[0].name
    samples = [{name: s["input"]} for s in example_samples(6)]
    labels = [np.array([i % 2], dtype=np.int64) for i in range(6)] if metric == "top1" else None
    scorer = Scorer(metric, None, reader(samples), "cpu", labels)
    scorer.score_float(float_model)
    # A second model that differs from the float one: the float model with its weights perturbed
    model = onnx.load(str(float_model))
    for initializer in model.graph.initializer:
        array = onnx.numpy_helper.to_array(initializer)
        if array.dtype == np.float32 and array.size > 1:
            noisy = array + np.random.default_rng(1).normal(0, 0.2, array.shape).astype(np.float32)
            initializer.CopyFrom(onnx.numpy_helper.from_array(noisy, initializer.name))
    other = tmp_path / "other.onnx"
    onnx.save(model, str(other))

    whole = scorer.score(other)
    for order in (None, [5, 4, 3, 2, 1, 0], [2, 0, 5, 1, 3, 4]):
        watch = Recorder(order)
        assert scorer.score(other, watch) == whole  # exactly
        assert [i for i, _, _ in watch.told] == (order or list(range(6)))
        assert [r for _, _, r in watch.told] == [5, 4, 3, 2, 1, 0]
    stale = Recorder([0, 1, 7])  # an order made from other samples: the reader's order is used
    assert scorer.score(other, stale) == whole and [i for i, _, _ in stale.told] == list(range(6))
