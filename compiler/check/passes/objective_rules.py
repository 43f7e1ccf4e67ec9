"""Objectives pass: Spec in; diagnostics out for search.objectives, evaluation.tolerance and search.stop.

QAS350: a tolerance the metric cannot take (a percentage needs a float score: a user evaluator's, or top1/top5's
accuracy; psnr has no finite float reference); QAS351: several objectives with a sampler or a stage that takes one
(CmaEs, Grid, two-stage grid selection); QAS352: objectives without accuracy; QAS353: stop.at_tolerance without a
tolerance; QAS356: search.prune where it cannot prune: several objectives (Optuna's pruners take one value), a user
evaluator that returns one score a model (a generator that yields one score a sample can be pruned), sampler Grid
(no sampler trials); QAS354 (warning): latency measured by several workers sharing a machine; QAS355 (warning):
stop.min_trials above the budget; QAS357 (warning): the quantized_fraction objective without a keep_float search
(every trial would score the same share). The engine's support (QAS326) is the parallel pass's; a latency device
without its execution provider is the environment pass's (QAS603), which runs first; a timeout that is no duration
is the schema's (QAS205).
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.check.resolved import TASK_METRICS, accuracy_control, objectives, spec_path, two_stage
from compiler.check.user_code import yields
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec
from compiler.runtime.contract import MULTI_OBJECTIVE_SAMPLERS


def check(spec: Spec) -> Iterator[Diagnostic]:
    yield from _tolerance(spec)
    yield from _objectives(spec)
    yield from _stop(spec)
    yield from _prune(spec)


def _prune(spec: Spec) -> Iterator[Diagnostic]:
    if spec.search.prune is None:
        return
    at = (*spec.search.path, "prune")
    if spec.search.sampler == "Grid":
        yield diag("QAS356", "search.prune stops sampler trials, and sampler Grid runs only grid configurations",
                   at, hint="remove search.prune, or use a sampler such as TPE", at_key=True)
    if len(objectives(spec)) > 1:
        yield diag("QAS356", f"search.prune stops a trial by its per-sample accuracy, but search.objectives has "
                             f"{len(objectives(spec))} objectives (Optuna's pruners take one value)", at,
                   hint="remove search.prune, or use objectives: [accuracy]", at_key=True)
    evaluator = spec.evaluation.evaluator
    if evaluator is not None:
        file, name = evaluator.rsplit(":", 1)
        if yields(spec_path(spec, file), name) is False:  # None: the data pass says what is wrong with the file
            yield diag("QAS356", f"search.prune needs one score a sample, and evaluator {evaluator} returns one score "
                                 "a model", at, hint="yield one score per evaluation sample instead of returning "
                                                     "their mean (see the evaluator contract in README), or remove "
                                                     "search.prune", at_key=True)


def _tolerance(spec: Spec) -> Iterator[Diagnostic]:
    written = spec.evaluation.tolerance
    if written is None:
        return
    at = (*spec.evaluation.path, "tolerance")
    metric = spec.evaluation.metric
    if isinstance(written, str) and metric is not None and metric not in TASK_METRICS:
        yield diag("QAS350", f"a percentage tolerance is relative to the float model's score, but metric {metric} "
                             "compares outputs with the float model's (the float model scores 0 or 1 against itself)",
                   at, hint="write the largest acceptable distance as a number, e.g. tolerance: 0.01")
    elif metric == "psnr":
        yield diag("QAS350", "metric psnr has no finite float reference (the float model's psnr against itself is "
                             "infinite), so no loss can be measured against it", at,
                   hint="use metric cos or ssim (tolerance = the largest 1 - similarity) or L2, or a user evaluator")


def _objectives(spec: Spec) -> Iterator[Diagnostic]:
    written = spec.search.objectives
    if written is None:
        return
    at = (*spec.search.path, "objectives")
    if "quantized_fraction" in written and (spec.keep_float.search is None):
        yield diag("QAS357", "objective quantized_fraction compares how much of the model each trial keeps in float, "
                             "but without keep_float.search every trial keeps the same nodes", at,
                   hint="add keep_float: {search: {top_k: [0, 1, 2, 4]}} (a prefix of the sensitivity ranking), "
                        "or drop quantized_fraction")
    if "accuracy" not in written:
        yield diag("QAS352", "search.objectives must include accuracy: latency and size alone would recommend "
                             "the fastest or smallest model however wrong it is", at,
                   hint=f"write objectives: [accuracy, {', '.join(written)}]")
    if len(objectives(spec)) < 2:
        return
    sampler = spec.search.sampler
    if sampler not in MULTI_OBJECTIVE_SAMPLERS:
        yield diag("QAS351", f"sampler {sampler} takes one objective, and search.objectives has "
                             f"{len(objectives(spec))}", (*spec.search.path, "sampler"),
                   hint=f"use sampler {' or '.join(MULTI_OBJECTIVE_SAMPLERS)}, or objectives: [accuracy]")
    elif two_stage(spec) and not (accuracy_control(spec) and set(written) <= {"accuracy", "quantized_fraction"}):
        # accuracy_control's grid trials keep nothing float: their quantized_fraction is the same, accuracy decides
        where = ((*spec.search.path, "two_stage") if spec.search.two_stage is not None
                 else (*spec.search.path, "preset"))
        yield diag("QAS351", "the grid stage of a two-stage search pins one winner by accuracy alone, so it cannot "
                             "weigh latency or size", where,
                   hint="set search.two_stage: false (the sampler then searches the whole space), or objectives: "
                        "[accuracy]")
    if "latency" in written and (spec.search.workers > 1 or not spec.output.launch.empty):
        yield diag("QAS354", "latency is measured by each worker while the others run: workers sharing a machine "
                             "slow each other down, and machines differ, so latencies compare less well", at,
                   hint="run latency searches with workers: 1, or compare the winner's latency again on its own")


def _stop(spec: Spec) -> Iterator[Diagnostic]:
    stop = spec.search.stop
    if stop is None:
        return
    if stop.at_tolerance and spec.evaluation.tolerance is None:
        yield diag("QAS353", "search.stop.at_tolerance stops once a trial is within evaluation.tolerance, and "
                             "none is declared", (*stop.path, "at_tolerance"),
                   hint="add evaluation.tolerance (e.g. 0.01, or \"1%\" with a user evaluator)")
    if stop.at_tolerance and stop.min_trials is not None and stop.min_trials > spec.search.n_trials:
        yield diag("QAS355", f"search.stop.min_trials ({stop.min_trials}) is above n_trials "
                             f"({spec.search.n_trials}): the tolerance stop can never fire",
                   (*stop.path, "min_trials"), hint=f"set min_trials to at most {spec.search.n_trials}")
