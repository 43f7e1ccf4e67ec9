"""The winner's files: a finished Search in; best_model.onnx, best_config.json (and pareto.json with several
objectives) and Optuna's plots out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from . import contract, objectives
from .artifacts import fetch_artifact
from .checks import fail
from .console import warn
from .files import write_json
from .pareto_plot import ParetoInput, accuracy_label, float_accuracy, pareto_figure
from .search import Search
from .settings import Settings


def write_best(search: Search) -> dict[str, Any]:
    """The best complete trial in the studies in; best_model.onnx and best_config.json written, and the summary out.

    The winner's model may have been written by a worker on another machine: it is then fetched from the
    artifact folder, or (without one) best_config.json says where it is and best_model.onnx is not written."""
    settings = search.settings
    ranked = search.ranked()
    if not ranked:
        fail(f"no trial completed; {search.failures()} failed (see the trials' `error` attributes)")
    best = ranked[0]
    stage = best.user_attrs[contract.ATTR_STAGE]
    source = best if contract.ATTR_REUSED_FROM not in best.user_attrs else next(
        (t for t in ranked if t.number == best.user_attrs[contract.ATTR_REUSED_FROM]
         and t.user_attrs[contract.ATTR_STAGE] == stage), best)
    temp = settings.best_model_path.with_name(settings.best_model_path.name + ".tmp")
    local = settings.path(best.user_attrs[contract.ATTR_MODEL])
    if local.is_file():
        shutil.copyfile(local, temp)
        copied = True
    else:
        copied = fetch_artifact(settings, source, temp)
    if copied:
        os.replace(temp, settings.best_model_path)
    else:
        settings.best_model_path.unlink(missing_ok=True)  # never leave an older winner under the winner's name
        warn(f"qas: the best model, {best.user_attrs[contract.ATTR_MODEL]}, was written by worker "
             f"{best.user_attrs.get(contract.ATTR_WORKER, '(unknown)')} in its own output folder; copy it from "
             f"there (set storage.artifacts to a shared folder to have it here)")
    summary = {
        "stage": stage,
        "config": best.user_attrs[contract.ATTR_CONFIG],
        "value": best.values[0] if settings.multi_objective else best.value,  # the accuracy objective
        "trial_number": best.number,
        "study": settings.grid_study_name if stage == contract.STAGE_GRID else settings.study_name,
        "model": best.user_attrs[contract.ATTR_MODEL],
        "best_model": contract.BEST_MODEL_FILE if copied else None,
        "worker": best.user_attrs.get(contract.ATTR_WORKER),
        "trials_complete": len(search.complete(search.sampler_study)),
        "grid_complete": len(search.complete(search.grid_study)),
        "trials_failed": search.failures(),
        "metric": settings.metric,
        "direction": settings.direction,
        "spec_hash": settings.spec_hash,
        "space_hash": settings.space_hash,
    }
    if contract.ATTR_KEEP_FLOAT in best.user_attrs:  # beyond the fixed keep_float: the groups and exact nodes
        summary["keep_float"] = best.user_attrs[contract.ATTR_KEEP_FLOAT]
    if settings.evaluator is not None:
        summary["objective"] = "float-model score minus quantized-model score, oriented by higher_is_better; minimized"
        summary[contract.FLOAT_SCORE_ATTR] = search.sampler_study.user_attrs.get(contract.FLOAT_SCORE_ATTR)
    elif settings.metric in contract.TASK_METRICS:
        summary["objective"] = (f"float-model {settings.metric} minus quantized-model {settings.metric} (the drop); "
                                "minimized")
        summary[contract.FLOAT_SCORE_ATTR] = search.sampler_study.user_attrs.get(contract.FLOAT_SCORE_ATTR)
    if settings.winner_rule or settings.stop:
        summary.update(winner_summary(search, ranked))
    write_json(settings.best_config_path, summary)
    return summary


def winner_summary(search: Search, ranked: list[Any]) -> dict[str, Any]:
    """best_config.json's keys for the winner rule: objectives, values, why the winner won, the runner-up, the float
    model's figures, the stop record; pareto.json (several objectives) written beside it."""
    settings = search.settings
    attrs = search.sampler_study.user_attrs
    limit = search.limit()
    out: dict[str, Any] = {"objectives": list(settings.objectives), "stopped": attrs.get(contract.STOPPED_ATTR)}
    if not settings.winner_rule:
        return out
    choice = objectives.choose(settings, search.trials("COMPLETE"), limit)
    entries = objectives.distinct(ranked)  # the runner-up is another configuration, never a repeat of the winner
    winner = ranked[0]
    out["values"] = objectives.values(settings, winner)
    out["repeated_by"] = entries[0][1]
    out["rule"] = objectives.rule_text(settings)
    out["tolerance"] = None if settings.tolerance is None else {
        **settings.tolerance, "bound": limit, "met": choice.within}
    out["runner_up"] = (objectives.trial_record(settings, entries[1][0], limit, entries[1][1]) if len(entries) > 1
                     else None)
    out["float"] = {"score": attrs.get(contract.FLOAT_SCORE_ATTR), "latency": attrs.get(contract.FLOAT_LATENCY_ATTR),
                    "size_bytes": attrs.get(contract.FLOAT_SIZE_ATTR)}
    for key in (contract.ATTR_LATENCY, contract.ATTR_SIZE):
        if key in winner.user_attrs:
            out[key] = winner.user_attrs[key]
    slower = objectives.versus_float(winner.user_attrs.get(contract.ATTR_LATENCY), out["float"]["latency"])
    out["why"] = choice.reason if slower is None else f"{choice.reason}; {slower}"
    if settings.multi_objective:
        front = objectives.pareto_front(settings, search.trials("COMPLETE"))
        write_json(settings.path(contract.PARETO_FILE), {
            "objectives": list(settings.objectives), "directions": settings.directions, "winner": winner.number,
            "front": [objectives.trial_record(settings, t, limit, repeats) for t, repeats in front]})
        out["pareto"] = contract.PARETO_FILE
    return out


def _objective_name(settings: Settings) -> str:
    """What a trial's value is, for a plot's axis."""
    if settings.evaluator is None:
        return settings.metric or "objective"
    return f"{settings.evaluator['function']} {'drop' if settings.evaluator['higher_is_better'] else 'rise'} " \
           "from the float model"


def pareto_input(search: Search, study: Any) -> ParetoInput:
    """The search and the study it searched in; what the Pareto plot shows (trials, winner, tolerance bound, the float
    model's figures, the accuracy axis's name) out."""
    settings = search.settings
    attrs = search.sampler_study.user_attrs
    ranked = search.ranked(top=1)
    evaluator = settings.evaluator
    higher = (evaluator["higher_is_better"] if evaluator is not None
              else True if settings.metric in contract.TASK_METRICS else None)
    latency = attrs.get(contract.FLOAT_LATENCY_ATTR)
    trials = [(t.number, list(t.values)) for t in search.complete(study) if len(t.values) == len(settings.objectives)]
    return ParetoInput(
        objectives=list(settings.objectives), directions=list(settings.directions),
        accuracy_label=accuracy_label(evaluator["function"] if evaluator is not None else settings.metric, higher),
        trials=trials, winner=ranked[0].number if ranked else None, bound=search.limit(),
        float_values={"accuracy": float_accuracy(settings.direction),
                      "latency": latency.get("median_ms") if isinstance(latency, dict) else None,
                      "size": attrs.get(contract.FLOAT_SIZE_ATTR),
                      # the float model quantizes none of its weight nodes
                      **({"quantized_fraction": 0.0} if "quantized_fraction" in settings.objectives else {})})


def write_plots(search: Search) -> list[Path]:
    """Optuna's plots of the study that holds the searched trials, as HTML under report/ sharing one plotly.min.js (the
    one `qas report` writes there too); their paths out.

    One objective: optimization_history.html. Several (search.objectives): one history per objective (accuracy's
    keeps that name; optimization_history_latency.html, ..._size.html), each with its target and name, and
    pareto_front.html (pareto_plot.py: the tolerance line, the float model's point and the winner)."""
    import optuna

    settings = search.settings
    study = search.sampler_study if search.complete(search.sampler_study) else search.grid_study
    names = {"accuracy": _objective_name(settings), **contract.OBJECTIVE_LABELS}
    figures = {}
    if not settings.multi_objective:
        figures["optimization_history.html"] = optuna.visualization.plot_optimization_history(
            study, target_name=names["accuracy"])
    else:
        for index, name in enumerate(settings.objectives):
            file = "optimization_history.html" if name == "accuracy" else f"optimization_history_{name}.html"
            figures[file] = optuna.visualization.plot_optimization_history(
                study, target=lambda t, i=index: t.values[i], target_name=names[name])
        figures["pareto_front.html"] = pareto_figure(pareto_input(search, study))
    paths = []
    folder = settings.path(contract.PLOTS_DIR)
    folder.mkdir(exist_ok=True)
    for file, figure in figures.items():
        path = folder / file
        # plotly.min.js once beside them, not 4.8 MB a page; report/ is where `qas report` writes its plots and its
        # copy, so an output folder holds one (kept in the folder: a copied folder still opens offline)
        figure.write_html(str(path), include_plotlyjs="directory")
        paths.append(path)
    return paths
