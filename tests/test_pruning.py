"""search.prune's parts: the hardest-first order, the per-sample watch (reports each value, prunes only while samples
remain), and Scorer.score_by_sample, which must give the value Scorer.score gives, to the last bit, in any order."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from compiler.runtime.pruning import SampleWatch, hardest_first, make_pruner
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
    assert make_pruner(None) is None
    assert isinstance(make_pruner("wilcoxon"), optuna.pruners.WilcoxonPruner)


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
