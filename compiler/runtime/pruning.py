"""Pruning hopeless sampler trials sample by sample (search.prune: wilcoxon): a trial and the study's evaluation order
in; each sample's value reported to Optuna (step = the sample's index) and the trial stopped as PRUNED as soon as
Optuna's WilcoxonPruner finds it significantly worse than the best trial on the samples seen, out.

The order is hardest first: the samples sorted by the first scored sampler trial's values, worst first, recorded
once in the study so every worker and every re-run uses the same. The pruner pairs samples by index, so the order
changes only which samples are seen first, never what a complete trial's value is.
"""

from __future__ import annotations

import math
from typing import Any

from . import contract


def make_pruner(prune: str | None) -> Any:
    """Settings.prune in; the Optuna pruner (None without search.prune: Optuna's default, never asked) out."""
    if prune is None:
        return None
    import warnings

    import optuna

    with warnings.catch_warnings():  # "experimental": said once per process in search.log, of no use to the user
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.pruners.WilcoxonPruner(p_threshold=0.1)


class SampleWatch:
    """watch(index, value) for Scorer.score: reports each sample's value to the trial and raises optuna.TrialPruned
    when the pruner says so; `seen` counts the samples scored."""

    def __init__(self, trial: Any, order: list[int] | None) -> None:
        self.trial, self.order = trial, order
        self.values: dict[int, float] = {}
        self.seconds = 0.0  # spent reporting to the study and asking the pruner (a storage round trip a sample)

    @property
    def seen(self) -> int:
        return len(self.values)

    def __call__(self, index: int, value: float, remaining: int) -> None:
        """Sample `index` scored `value`, with `remaining` samples still to score."""
        import time

        started = time.perf_counter()
        try:
            self._tell(index, value, remaining)
        finally:
            self.seconds += time.perf_counter() - started

    def _tell(self, index: int, value: float, remaining: int) -> None:
        import optuna

        self.values[index] = value
        if not math.isfinite(value):  # e.g. psnr of a sample the model reproduces exactly: nothing to compare
            return
        self.trial.report(value, index)
        # After the last sample the value is known: pruning then would save nothing and lose a scored trial
        if remaining and self.trial.should_prune():
            raise optuna.TrialPruned(f"worse than the best trial on {self.seen} evaluation sample(s) "
                                     "(Wilcoxon signed-rank test)")


def hardest_first(values: dict[int, float], direction: str) -> list[int]:
    """A trial's per-sample values in; the sample indices worst first (largest for a minimized metric) out; a
    non-finite value counts as the best (psnr's infinity: the sample is reproduced exactly)."""
    sign = 1.0 if direction == "minimize" else -1.0

    def badness(index: int) -> float:
        value = values[index]
        return sign * value if math.isfinite(value) else -math.inf

    return sorted(values, key=lambda i: (-badness(i), i))


def evaluation_order(study: Any) -> list[int] | None:
    """The study's recorded hardest-first order, or None before a sampler trial was scored whole."""
    return study.user_attrs.get(contract.EVALUATION_ORDER_ATTR)
