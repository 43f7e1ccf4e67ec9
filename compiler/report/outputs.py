"""The report's files: the report (JSON-ready data) and its output dir in; plots under report/ (the HTML pages
sharing one plotly.min.js; with search.objectives one history an objective and the Pareto front) and report.md
written atomically, their relative paths out, or a one-line error.

Optuna, matplotlib and jinja2 are imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from compiler.report.history import history_figure, history_png, history_points
from compiler.report.studies import load_studies
from compiler.report.text import view
from compiler.runtime.contract import OBJECTIVE_LABELS, PLOTS_DIR
from compiler.runtime.pareto_plot import ParetoInput, accuracy_label, float_accuracy, pareto_figure, pareto_png

PLOTS = {"history_html": f"{PLOTS_DIR}/optimization_history.html",
         "history_png": f"{PLOTS_DIR}/optimization_history.png",
         "importances_html": f"{PLOTS_DIR}/param_importances.html",
         "pareto_html": f"{PLOTS_DIR}/pareto_front.html",  # search.objectives: runtime/pareto_plot.py
         "pareto_png": f"{PLOTS_DIR}/pareto_front.png",
         "history_latency_html": f"{PLOTS_DIR}/optimization_history_latency.html",  # search.objectives: one history
         "history_size_html": f"{PLOTS_DIR}/optimization_history_size.html",  # an objective (accuracy's above)
         "history_quantized_fraction_html": f"{PLOTS_DIR}/optimization_history_quantized_fraction.html"}
PLOTLY_JS = f"{PLOTS_DIR}/plotly.min.js"  # written once beside the HTML plots, which load it by this name
STAGE_LABELS = {"grid_name": "grid stage", "name": "sampler stage"}  # legend names for the studies (hashed names)


def write_report_files(report: dict[str, Any], out_dir: Path) -> list[str] | str:
    """The report and its output dir in; plots under report/ and report.md written, their relative paths out.

    A one-line error comes back instead when nothing could be written; then nothing was replaced.
    """
    from compiler.back.emit import replace_files
    from compiler.back.render import environment

    files: dict[str, str | bytes] = {}
    notes: list[str] = []
    shown = view(report)
    facts = report["study"]
    complete = report["trials"]["complete_sampler"] + report["trials"]["complete_grid"]
    loaded = (load_studies(out_dir / facts["db"], facts["name"], facts["grid_name"] or "", facts.get("url_env"))
              if complete else None)
    if loaded is None:
        notes.append("no plots: no trial has completed")
    elif isinstance(loaded, str):
        notes.append(f"no plots: {loaded}")
    else:
        studies = [study for study, trials in loaded if any(t.state.name == "COMPLETE" for t in trials)]
        ranked_by = next((s for s in studies if s.study_name == report["importances_study"]), None)
        labels = {facts[key]: label for key, label in STAGE_LABELS.items() if facts[key]}
        target = shown["value"] if report["metric"] is not None else "Objective Value"
        files.update(_plots(studies, ranked_by, list(report["importances"]), target, labels))
        if report.get("objectives") and len(report["objectives"]["objectives"]) > 1:
            names = report["objectives"]["objectives"]
            files.update(_objective_histories(studies, names, labels))
            files.update(_pareto_plots(studies[-1], report, notes))
        if ranked_by is None:
            notes.append("no importance plot: there are no importances (see the notes)")
    links = {key: name if name in files else None for key, name in PLOTS.items()}
    files["report.md"] = environment().get_template("report.md.j2").render(
        v=shown, links=links, file_notes=notes, fence=_fence(shown["config_json"]))
    problem = replace_files(files, out_dir)
    return f"cannot write the report into {out_dir}: {problem}" if problem is not None else list(files)


def _plots(studies: list[Any], importance_study: Any | None, importance_params: list[str],
           target_name: str, labels: dict[str, str]) -> dict[str, str | bytes]:
    """The studies (and a legend label for each study name) in; {relative path: content} of the history (HTML and
    PNG: the trials of both stages in the order they ran, with the best-so-far line) and importance (HTML) plots, and
    the plotly.js the HTML pages share, out."""
    import optuna
    from plotly.offline import get_plotlyjs

    several = any(s._is_multi_objective() for s in studies)  # search.objectives: plot the accuracy objective
    accuracy = {"target": (lambda t: t.values[0])} if several else {}
    points = history_points(studies, labels, 0)
    maximize = studies[0].directions[0].name == "MAXIMIZE"
    found: dict[str, str | bytes] = {PLOTS["history_html"]: _html(history_figure(points, maximize, target_name))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # importance notes already made
        if importance_study is not None:
            shares = optuna.visualization.plot_param_importances(importance_study, params=importance_params, **accuracy)
            found[PLOTS["importances_html"]] = _html(shares)
    found[PLOTLY_JS] = get_plotlyjs()
    found[PLOTS["history_png"]] = history_png(points, maximize, target_name)
    return found


def _html(figure: Any) -> bytes:
    # plotly.js is not inlined (about 5 MB a page): each page loads the one copy written beside it (PLOTLY_JS)
    return figure.to_html(include_plotlyjs="directory", full_html=True).encode("utf-8")


def _fence(text: str | None) -> str:
    """Text in; a markdown code fence longer than any run of backticks inside it out."""
    longest, run = 0, 0
    for char in text or "":
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _objective_histories(studies: list[Any], names: list[str], labels: dict[str, str]) -> dict[str, str | bytes]:
    """A multi-objective search's studies in; the optimization history (HTML) of each objective but accuracy (its
    history is the main one) out, each with its own target, direction, best-so-far line and axis name."""
    found: dict[str, str | bytes] = {}
    for index, name in enumerate(names):
        if f"history_{name}_html" not in PLOTS:
            continue
        maximize = studies[0].directions[index].name == "MAXIMIZE"
        figure = history_figure(history_points(studies, labels, index), maximize, OBJECTIVE_LABELS[name])
        found[PLOTS[f"history_{name}_html"]] = _html(figure)
    return found


def pareto_input(study: Any, report: dict[str, Any]) -> ParetoInput:
    """A multi-objective study and the report in; what the Pareto plot shows (trials, winner, tolerance bound, the
    float model's figures, the accuracy axis's name) out."""
    view = report["objectives"]
    names = list(view["objectives"])
    directions = [d.name.lower() for d in study.directions]
    trials = [(t.number, list(t.values)) for t in study.get_trials(deepcopy=False)
              if t.state.name == "COMPLETE" and t.values and len(t.values) == len(names)]
    best = report.get("best") or {}
    floats = view.get("float") or {}
    return ParetoInput(
        objectives=names, directions=directions,
        accuracy_label=accuracy_label(report["metric"], report.get("higher_is_better")), trials=trials,
        winner=best.get("trial_number") if best.get("study") in (None, study.study_name) else None,
        bound=(view.get("tolerance") or {}).get("bound"),
        float_values={"accuracy": float_accuracy(directions[names.index("accuracy")]),
                      "latency": floats.get("latency_ms"),
                      "size": floats.get("size_bytes") or report.get("float_model_bytes"),
                      **({"quantized_fraction": 0.0} if "quantized_fraction" in names else {})})


def _pareto_plots(study: Any, report: dict[str, Any], notes: list[str]) -> dict[str, str | bytes]:
    """A multi-objective study and the report in; the Pareto plot (runtime/pareto_plot.py: the tolerance line, the
    float model's point and the winner, axes named by what they are) as HTML, and as PNG when matplotlib draws it."""
    found: dict[str, str | bytes] = {}
    shown = pareto_input(study, report)
    if not shown.trials:
        notes.append("no Pareto plot: no complete trial has every objective's value")
        return found
    found[PLOTS["pareto_html"]] = _html(pareto_figure(shown))
    try:
        found[PLOTS["pareto_png"]] = pareto_png(shown)
    except Exception as error:  # noqa: BLE001 - no PNG is a note, not a failed report
        notes.append(f"no static Pareto-front PNG (matplotlib could not draw it: {type(error).__name__}); "
                     "the HTML plot has it")
    return found
