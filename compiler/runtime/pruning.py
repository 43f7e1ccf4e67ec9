"""Pruning hopeless sampler trials sample by sample (search.prune: wilcoxon): a trial and the study's evaluation order
in; each sample's value reported to Optuna (step = the sample's index) and the trial stopped as PRUNED as soon as
Optuna's WilcoxonPruner finds it significantly worse than the reference trial on the samples seen, out.

The reference is the best complete trial, except under TPE: TPE learns from its best ceil(10 %) of the trials (at most
25, Optuna's default gamma) against the rest, and a pruned trial always joins the rest. Compared with the last of
those best at the end of the budget, a pruned trial is one that would have been among the rest anyway, so with one
worker TPE draws what it would have drawn without pruning and the search ends on the same best configuration
(tests/test_e2e_prune.py and bench/trial_cost.py see it); against the best trial alone, pruned trials that would have
ranked second to fifth steer TPE elsewhere. Limits: the test is statistical (p < 0.1, asked again at every sample,
on per-sample differences while the value is their mean), so a pruned trial may rarely have ranked in that best
part after all; with several workers each draws from the trials finished when it asks, which pruning changes (a
pruned trial still never joins TPE's best part); a study resumed with a larger n_trials compared its earlier trials
with a smaller rank.

The order is hardest first: the samples sorted by the first scored sampler trial's values, worst first, recorded
once in the study so every worker and every re-run uses the same. The pruner pairs samples by index, so the order
changes only which samples are seen first, never what a complete trial's value is.
"""

from __future__ import annotations

import math
from typing import Any

from . import contract

P_THRESHOLD = 0.1  # Optuna's default


def make_pruner(prune: str | None, sampler: str, n_trials: int) -> Any:
    """Settings.prune, the sampler and the sampler stage's budget in; the Optuna pruner (None without search.prune:
    Optuna's default, never asked) out."""
    if prune is None:
        return None
    import warnings

    import optuna

    class RankedWilcoxonPruner(optuna.pruners.WilcoxonPruner):
        """Optuna's WilcoxonPruner against the study's rank-th best complete trial instead of its best."""

        def __init__(self, rank: int) -> None:
            super().__init__(p_threshold=P_THRESHOLD)
            self.rank = rank
            self.reference = "the best trial" if rank == 1 else f"the {_ordinal(rank)} best trial"  # in messages

        def prune(self, study: Any, trial: Any) -> bool:
            return super().prune(_Ranked(study, self.rank), trial)

    with warnings.catch_warnings():  # "experimental": said once per process in search.log, of no use to the user
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RankedWilcoxonPruner(reference_rank(sampler, n_trials))


def reference_rank(sampler: str, n_trials: int) -> int:
    """The sampler and the budget in; the rank of the complete trial pruning compares with (1: the best) out: under
    TPE the size of its best part at the end of the budget (Optuna's default gamma: ceil(10 %), at most 25)."""
    return min(math.ceil(0.1 * n_trials), 25) if sampler == "TPE" else 1


class _Ranked:
    """A study seen by WilcoxonPruner.prune (which asks it for best_trial and direction): its best_trial is the
    rank-th best complete trial (a repeat answered from the study stands for the trial it repeats, whose per-sample
    values it lacks), or the first worse one with per-sample values; ValueError, as Optuna's own, while there is
    none."""

    def __init__(self, study: Any, rank: int) -> None:
        self.study, self.rank = study, rank
        self.direction = study.direction

    @property
    def best_trial(self) -> Any:
        from optuna.study import StudyDirection
        from optuna.trial import TrialState

        complete = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        ranked = sorted(complete, key=lambda t: t.value, reverse=self.direction == StudyDirection.MAXIMIZE)
        by_number = {t.number: t for t in complete}
        for trial in ranked[self.rank - 1:]:
            source = by_number.get(trial.user_attrs.get(contract.ATTR_REUSED_FROM, trial.number), trial)
            if source.intermediate_values:
                return source
        raise ValueError(f"no reference trial yet: {len(ranked)} complete, the {_ordinal(self.rank)} best is "
                         "compared with")


def _ordinal(n: int) -> str:
    """2 -> '2nd', 11 -> '11th', 23 -> '23rd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class SampleWatch:
    """watch(index, value) for Scorer.score: reports each sample's value to the trial and raises optuna.TrialPruned
    when the pruner says so; `seen` counts the samples scored."""

    def __init__(self, trial: Any, order: list[int] | None, reference: str = "the best trial") -> None:
        self.trial, self.order = trial, order
        self.reference = reference  # what the pruner compares with, as its message says it
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
            raise optuna.TrialPruned(f"worse than {self.reference} on {self.seen} evaluation sample(s) "
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
