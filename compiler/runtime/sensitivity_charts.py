"""Charts of the ranking: the top groups and the metric in; sensitivity.html (plotly) and sensitivity.png
(matplotlib), each when installed, and what was written or why not, as lines, out."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_charts(path: Path, groups: list[dict[str, Any]], measure: str) -> list[str]:
    """Bars of the groups' scores, with their noise as error bars; groups within their noise drawn grey. `measure`
    says what the scores measure in words (mean squared error (L2), KL divergence, cosine distance)."""
    names = [g["name"] for g in groups][::-1]
    scores = [g["score"] for g in groups][::-1]
    noise = [g.get("noise", 0.0) for g in groups][::-1]
    colors = ["#1f77b4" if g.get("above_noise", True) else "#bbbbbb" for g in groups][::-1]
    title = f"Output {measure} removed by keeping each group in float (top {len(groups)}; grey: within noise)"
    lines = []
    try:
        import plotly.graph_objects as go

        figure = go.Figure(go.Bar(x=scores, y=names, orientation="h", marker_color=colors,
                                  error_x={"type": "data", "array": noise}))
        figure.update_layout(title=title, xaxis_title=f"{measure} removed", height=200 + 22 * len(names))
        figure.write_html(str(path.with_suffix(".html")), include_plotlyjs="directory")
        lines.append(f"wrote {path.with_suffix('.html').name}")
    except ImportError:
        lines.append("plotly is not installed: no sensitivity.html")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 1.5 + 0.3 * len(names)))
        ax.barh(names, scores, xerr=noise, color=colors)
        ax.set_xlabel(f"{measure} removed")
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(path.with_suffix(".png"), dpi=100)
        plt.close(fig)
        lines.append(f"wrote {path.with_suffix('.png').name}")
    except ImportError:
        lines.append("matplotlib is not installed: no sensitivity.png")
    return lines
