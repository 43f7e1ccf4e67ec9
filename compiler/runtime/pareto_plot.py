"""The Pareto plot of a multi-objective search: its complete trials, objectives, tolerance bound, float-model figures
and winner in (a ParetoInput); a plotly figure (HTML) and a matplotlib PNG out, one panel per objective beside accuracy.

Each panel puts the accuracy objective (the loss: "L2 to the float model", "top1 drop from the float model") on x and
latency (ms per sample) or size (MB) on y, and shows every trial, the Pareto front over all the objectives, the
tolerance bound as a dashed line, the float model's own point and the winner (a star, named). Optuna's own plot names
its axes "values_0" or by objective key, draws no bound and no float model; this one answers "what did quantizing
cost and buy". Shared by the runtime (output.plots) and `qas report`; plotly and matplotlib imported inside the
functions.
"""

from __future__ import annotations

import io
from typing import Any, NamedTuple

from . import contract

AXES = {**contract.OBJECTIVE_LABELS, "size": "size (MB)"}
SCALE = {"accuracy": 1.0, "latency": 1.0, "size": 1e-6, "quantized_fraction": 1.0}  # stored: loss, ms, bytes, share
COLORS = {"trial": "#9aa5b1", "front": "#1f77b4", "winner": "#d62728", "float": "#111111", "tolerance": "#2ca02c"}
TITLE = "Pareto front: what quantizing cost (x) against what it bought (y)"


class ParetoInput(NamedTuple):
    objectives: list[str]  # contract.OBJECTIVES order, accuracy first
    directions: list[str]  # "minimize" | "maximize", one an objective
    accuracy_label: str  # what the accuracy value is ("L2 to the float model")
    trials: list[tuple[int, list[float]]]  # complete trials: (number, values)
    winner: int | None  # the recommended winner's trial number
    bound: float | None  # evaluation.tolerance on the accuracy axis (None: none declared)
    float_values: dict[str, float | None]  # the float model's accuracy, latency (ms) and size (bytes)


def accuracy_label(metric: str | None, higher_is_better: bool | None) -> str:
    """The accuracy objective's axis name: a Quark metric against the float outputs, or a task metric's or user
    evaluator's drop (rise) from the float model's score."""
    name = metric or "value"
    if higher_is_better is None:
        return f"{name} to the float model"
    return f"{name} drop from the float model" if higher_is_better else f"{name} rise over the float model"


def float_accuracy(direction: str) -> float:
    """The float model's own accuracy value: 0 loss (a drop, L1, L2) or 1 similarity (cos, ssim) against itself."""
    return 1.0 if direction == "maximize" else 0.0


def front_numbers(p: ParetoInput) -> set[int]:
    """The trials no other trial dominates on every objective (oriented by the directions)."""
    signs = [-1.0 if d == "maximize" else 1.0 for d in p.directions]
    points = {n: [s * v for s, v in zip(signs, values, strict=True)] for n, values in p.trials}

    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x <= y for x, y in zip(a, b, strict=True)) and a != b

    return {n for n, v in points.items() if not any(dominates(o, v) for o in points.values())}


def panels(p: ParetoInput) -> list[str]:
    """The objectives plotted against accuracy, one panel each."""
    return [n for n in p.objectives if n != "accuracy"]


def _xy(p: ParetoInput, name: str, numbers: set[int] | None = None) -> tuple[list[float], list[float], list[int]]:
    ai, yi = p.objectives.index("accuracy"), p.objectives.index(name)
    chosen = [(n, v) for n, v in p.trials if numbers is None or n in numbers]
    chosen.sort(key=lambda t: t[1][ai])
    return ([v[ai] for _, v in chosen], [v[yi] * SCALE[name] for _, v in chosen], [n for n, _ in chosen])


def _winner_values(p: ParetoInput) -> list[float] | None:
    return next((v for n, v in p.trials if n == p.winner), None)


def _float_point(p: ParetoInput, name: str) -> tuple[float, float] | None:
    accuracy, other = p.float_values.get("accuracy"), p.float_values.get(name)
    if accuracy is None or other is None:
        return None
    return float(accuracy), float(other) * SCALE[name]


def tolerance_text(p: ParetoInput) -> str:
    sign = "≥" if p.directions[p.objectives.index("accuracy")] == "maximize" else "≤"
    return f"tolerance: {sign} {p.bound:.4g}"


def bound_in_view(p: ParetoInput) -> bool:
    """The tolerance bound lies near the points (within twice their spread on the accuracy axis): drawn as a line.
    A bound far beyond every point (tolerance: 100 against losses of 0.001) would squeeze them all into one spot, so
    it is named in a note instead ("every trial is within it")."""
    if p.bound is None:
        return False
    ai = p.objectives.index("accuracy")
    xs = [v[ai] for _, v in p.trials] + [x for x in (p.float_values.get("accuracy"),) if x is not None]
    low, high = min(xs), max(xs)
    reach = 2 * max(high - low, abs(high) * 0.1, 1e-12)
    return low - reach <= p.bound <= high + reach


def tolerance_note(p: ParetoInput) -> str:
    """The bound's note when it is out of view: which side it is on, and that every trial is within it or none is."""
    ai = p.objectives.index("accuracy")
    maximize = p.directions[ai] == "maximize"
    within = [n for n, v in p.trials if (v[ai] >= p.bound if maximize else v[ai] <= p.bound)]
    who = "every trial is within it" if len(within) == len(p.trials) else "no trial is within it" if not within \
        else f"{len(within)} of {len(p.trials)} trials are within it"
    return f"{tolerance_text(p)}, beyond the axis: {who}"


def pareto_figure(p: ParetoInput) -> Any:
    """A Pareto input in; a plotly figure with one panel an objective beside accuracy."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = panels(p)
    front = front_numbers(p)
    figure = make_subplots(rows=1, cols=len(names), horizontal_spacing=0.12)
    winner = _winner_values(p)
    for col, name in enumerate(names, start=1):
        first = col == 1  # one legend entry a kind, not one a panel
        x, y, numbers = _xy(p, name)
        figure.add_trace(go.Scatter(
            x=x, y=y, mode="markers", name="trial", legendgroup="trial", showlegend=first,
            marker={"color": COLORS["trial"], "size": 8}, text=[f"trial {n}" for n in numbers],
            hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>"), row=1, col=col)
        x, y, numbers = _xy(p, name, front)
        figure.add_trace(go.Scatter(
            x=x, y=y, mode="markers+lines" if len(names) == 1 else "markers", name="Pareto front (all objectives)",
            legendgroup="front", showlegend=first, line={"shape": "hv", "color": COLORS["front"]},
            marker={"color": COLORS["front"], "size": 10}, text=[f"trial {n} (Pareto front)" for n in numbers],
            hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>"), row=1, col=col)
        point = _float_point(p, name)
        if point is not None:
            figure.add_trace(go.Scatter(
                x=[point[0]], y=[point[1]], mode="markers+text", name="float model", legendgroup="float",
                showlegend=first, marker={"color": COLORS["float"], "size": 13, "symbol": "diamond"},
                text=["float model"], textposition="top right",
                hovertemplate="float model<br>%{x:.4g}, %{y:.4g}<extra></extra>"), row=1, col=col)
        if winner is not None:
            wx, wy = winner[p.objectives.index("accuracy")], winner[p.objectives.index(name)] * SCALE[name]
            figure.add_trace(go.Scatter(
                x=[wx], y=[wy], mode="markers", name=f"winner: trial {p.winner}", legendgroup="winner",
                showlegend=first, marker={"color": COLORS["winner"], "size": 18, "symbol": "star"},
                hovertemplate=f"winner: trial {p.winner}<br>%{{x:.4g}}, %{{y:.4g}}<extra></extra>"), row=1, col=col)
            figure.add_annotation(x=wx, y=wy, text=f"winner: trial {p.winner}", showarrow=True, arrowhead=2,
                                  ax=40, ay=-36, font={"color": COLORS["winner"]}, row=1, col=col)
        if bound_in_view(p):
            figure.add_vline(x=p.bound, line_dash="dash", line_color=COLORS["tolerance"], row=1, col=col,
                             annotation_text=tolerance_text(p), annotation_position="top left",
                             annotation_font_color=COLORS["tolerance"])
        figure.update_xaxes(title_text=p.accuracy_label, row=1, col=col)
        figure.update_yaxes(title_text=AXES[name], row=1, col=col)
    if p.bound is not None and not bound_in_view(p):
        figure.add_annotation(text=tolerance_note(p), xref="paper", yref="paper", x=1.0, y=1.06, showarrow=False,
                              xanchor="right", font={"color": COLORS["tolerance"]})
    figure.update_layout(title=TITLE, template="plotly_white", legend={"orientation": "h", "y": -0.2})
    return figure


def pareto_png(p: ParetoInput) -> bytes:
    """The same plot as a PNG (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = panels(p)
    front = front_numbers(p)
    winner = _winner_values(p)
    figure, axes = plt.subplots(1, len(names), figsize=(6.2 * len(names), 4.8), squeeze=False)
    try:
        for axis, name in zip(axes[0], names, strict=True):
            x, y, _ = _xy(p, name)
            axis.scatter(x, y, color=COLORS["trial"], s=30, label="trial", zorder=2)
            x, y, _ = _xy(p, name, front)
            if len(names) == 1:
                axis.step(x, y, where="post", color=COLORS["front"], linewidth=1, zorder=2)
            axis.scatter(x, y, color=COLORS["front"], s=45, label="Pareto front (all objectives)", zorder=3)
            point = _float_point(p, name)
            if point is not None:
                axis.scatter([point[0]], [point[1]], color=COLORS["float"], marker="D", s=60, label="float model",
                             zorder=4)
                axis.annotate("float model", point, textcoords="offset points", xytext=(6, 6), fontsize=9)
            if winner is not None:
                wx, wy = winner[p.objectives.index("accuracy")], winner[p.objectives.index(name)] * SCALE[name]
                axis.scatter([wx], [wy], color=COLORS["winner"], marker="*", s=260, label=f"winner: trial {p.winner}",
                             zorder=5)
                axis.annotate(f"winner: trial {p.winner}", (wx, wy), textcoords="offset points", xytext=(8, -14),
                              color=COLORS["winner"], fontsize=9)
            if bound_in_view(p):
                axis.axvline(p.bound, color=COLORS["tolerance"], linestyle="--", label=tolerance_text(p), zorder=1)
            axis.margins(x=0.08, y=0.12)  # the float model's label stays inside the frame
            axis.set_xlabel(p.accuracy_label)
            axis.set_ylabel(AXES[name])
            axis.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=8, loc="best")
        title = TITLE if p.bound is None or bound_in_view(p) else f"{TITLE}\n{tolerance_note(p)}"
        figure.suptitle(title, fontsize=11)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
    finally:
        plt.close(figure)
