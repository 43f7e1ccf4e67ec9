"""Metric/direction pass: Spec in; QAS501 out. `resolved.direction` derives the objective's direction.

Built-in distances (L2, L1) minimize; cos, psnr and ssim maximize, and Quark's grid stage always
takes the minimum (QUARK-FACTS F5), so when Quark's own loop runs the search (engine autosearchpro)
they cannot use Grid or two-stage search. A user evaluator is always minimized as `baseline - score`
by Quark (F6): the script orients the score so that this is right for `higher_is_better` either way.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..diagnostics import Diagnostic, diag
from ..model import Spec
from ..resolved import MAXIMIZED_METRICS, engine, quark_runs_search, two_stage


def check(spec: Spec) -> Iterator[Diagnostic]:
    metric = spec.evaluation.metric
    if metric not in MAXIMIZED_METRICS or not quark_runs_search(engine(spec)):  # qas's own loop ranks by direction
        return
    if spec.search.sampler == "Grid":
        yield diag("QAS501", f"metric {metric} is maximized, but Quark's Grid search always keeps the minimum "
                             "and would select the worst model", spec.search.path + ("sampler",),
                   hint="use sampler TPE (or Random), or metric L2/L1")
    elif two_stage(spec):
        where = spec.search.path + ("two_stage",) if spec.search.two_stage is not None else spec.search.path + ("preset",)
        yield diag("QAS501", f"metric {metric} is maximized, but the grid stage of two-stage search always keeps "
                             "the minimum and would select the worst calibration", where,
                   hint="set search.two_stage: false, or use metric L2/L1")
