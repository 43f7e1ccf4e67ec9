"""The history plots: a search's studies (grid and sampler stage) in; each complete trial as a point in the order the
trials started, on one running x-axis over both stages, with the best-so-far line (one objective or several), as a
plotly figure (HTML) and a matplotlib PNG out.

Optuna's own history plot numbers each study's trials from 0, so the grid and sampler stages land on the same x
(0, 1, 2) and a multi-objective study gets no best line; this one says what ran when.
plotly and matplotlib are imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any, NamedTuple

X_TITLE = "trial, in the order they started (both stages)"


class Point(NamedTuple):
    x: int  # the running index over both stages, by start time
    stage: str  # the series label: "grid stage", "sampler stage"
    number: int  # the trial's number in its own study
    value: float


def history_points(studies: list[Any], labels: dict[str, str], index: int = 0) -> list[Point]:
    """The studies, a label per study name and which of a trial's values in; the complete trials as Points, ordered by
    when they started (ties: the grid stage first, then by number), out."""
    found = []
    for order, study in enumerate(studies):
        label = labels.get(study.study_name, study.study_name)
        for trial in study.get_trials(deepcopy=False):
            if trial.state.name != "COMPLETE" or not trial.values or len(trial.values) <= index:
                continue
            when = trial.datetime_start or trial.datetime_complete or datetime.max
            grid_first = 0 if label.startswith("grid") else 1 + order
            found.append((when, grid_first, trial.number, label, float(trial.values[index])))
    found.sort(key=lambda f: f[:3])
    return [Point(x, label, number, value) for x, (_w, _g, number, label, value) in enumerate(found)]


def best_so_far(points: list[Point], maximize: bool) -> list[float]:
    """Points in run order in; the best value seen up to each of them out."""
    best: list[float] = []
    for p in points:
        best.append(p.value if not best else (max if maximize else min)(best[-1], p.value))
    return best


def tick_step(last: int) -> int:
    """The largest x in; a whole tick step (1, 2, 5, 10, 20, 50, ...) giving at most 10 steps out."""
    magnitude = 1
    while True:
        for base in (1, 2, 5):
            if last <= 10 * base * magnitude:
                return base * magnitude
        magnitude *= 10


def history_figure(points: list[Point], maximize: bool, axis_name: str) -> Any:
    """Points in; a plotly figure: one marker series a stage, the best-so-far line over both, whole-trial ticks."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for stage in dict.fromkeys(p.stage for p in points):
        mine = [p for p in points if p.stage == stage]
        figure.add_trace(go.Scatter(
            x=[p.x for p in mine], y=[p.value for p in mine], mode="markers", name=stage,
            text=[f"{stage}, trial {p.number}" for p in mine],
            hovertemplate="%{text}<br>" + axis_name + " %{y}<extra></extra>"))
    figure.add_trace(go.Scatter(x=[p.x for p in points], y=best_so_far(points, maximize), mode="lines",
                                line={"shape": "hv"}, name=f"best so far ({'highest' if maximize else 'lowest'})"))
    figure.update_layout(title=f"Optimization history: {axis_name}", xaxis_title=X_TITLE, yaxis_title=axis_name,
                         template="plotly_white")
    figure.update_xaxes(tick0=0, dtick=tick_step(points[-1].x if points else 0))
    return figure


def history_png(points: list[Point], maximize: bool, axis_name: str) -> bytes:
    """Points in; the same plot as a PNG (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(figsize=(10, 5))
    try:
        for stage in dict.fromkeys(p.stage for p in points):
            mine = [p for p in points if p.stage == stage]
            axes.scatter([p.x for p in mine], [p.value for p in mine], label=stage, zorder=3)
        axes.step([p.x for p in points], best_so_far(points, maximize), where="post", color="tab:red",
                  label=f"best so far ({'highest' if maximize else 'lowest'})")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials: 0, 1, 2, never 0.25
        axes.set_xlabel(X_TITLE)
        axes.set_ylabel(axis_name)
        axes.set_title(f"Optimization history: {axis_name}")
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    finally:
        plt.close(figure)
    return buffer.getvalue()
