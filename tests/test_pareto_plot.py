"""The Pareto plot without amd-quark: on a fake multi-objective search (accuracy, latency, size, a tolerance) the
runtime's and the report's plots carry the tolerance line, the float model's point and the winner, with axes named
by what they are (never "values_0" or "accuracy"), in the HTML (plotly) and the PNG (matplotlib)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.runtime import pareto_plot
from compiler.runtime.pareto_plot import ParetoInput, accuracy_label, front_numbers, pareto_figure, pareto_png

from .conftest import FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FLOAT_MS, FLOAT_BYTES = 2.0, 4_000_000


def sample(**changes: Any) -> ParetoInput:
    values = dict(objectives=["accuracy", "latency", "size"], directions=["minimize"] * 3,
                  accuracy_label=accuracy_label("L2", None),
                  trials=[(0, [0.02, 1.2, 1.5e6]), (1, [0.01, 1.5, 3e6]), (2, [0.08, 0.9, 1.2e6]),
                          (3, [0.03, 1.3, 1.6e6]), (4, [0.015, 1.25, 1.5e6])],
                  winner=4, bound=0.05, float_values={"accuracy": 0.0, "latency": FLOAT_MS, "size": FLOAT_BYTES})
    values.update(changes)
    return ParetoInput(**values)


def page_text(path: Path) -> str:
    """An HTML plot's text with plotly's JSON escapes of ≤ and ≥ undone."""
    return path.read_text(encoding="utf-8").replace("\\u2264", "≤").replace("\\u2265", "≥")


def names(figure: Any) -> list[str]:
    return [trace.name for trace in figure.data]


def test_each_panel_has_trials_front_float_model_winner_and_tolerance_with_named_axes() -> None:
    figure = pareto_figure(sample())
    assert names(figure) == ["trial", "Pareto front (all objectives)", "float model", "winner: trial 4"] * 2
    assert figure.layout.xaxis.title.text == figure.layout.xaxis2.title.text == "L2 to the float model"
    assert figure.layout.yaxis.title.text == "latency (ms per sample)"
    assert figure.layout.yaxis2.title.text == "size (MB)"
    tolerance = [s for s in figure.layout.shapes if s.line.dash == "dash"]
    assert len(tolerance) == 2 and all(s.x0 == s.x1 == 0.05 for s in tolerance)
    texts = [a.text for a in figure.layout.annotations]
    assert texts.count("winner: trial 4") == 2 and texts.count("tolerance: ≤ 0.05") == 2
    floats = [t for t in figure.data if t.name == "float model"]
    assert [(t.x[0], t.y[0]) for t in floats] == [(0.0, FLOAT_MS), (0.0, FLOAT_BYTES / 1e6)]  # size in MB
    winner = [t for t in figure.data if t.name == "winner: trial 4"]
    assert [(t.x[0], t.y[0]) for t in winner] == [(0.015, 1.25), (0.015, 1.5)]
    assert "values_0" not in figure.to_json() and '"accuracy"' not in figure.to_json()


def test_the_front_is_every_objective_s_and_a_maximized_metric_turns_it() -> None:
    assert front_numbers(sample()) == {0, 1, 2, 4}  # 3 is dominated by 0 on all three
    cos = sample(directions=["maximize", "minimize", "minimize"], trials=[(0, [0.99, 1.0, 1e6]), (1, [0.98, 1.0, 1e6])])
    assert front_numbers(cos) == {0}
    assert pareto_plot.float_accuracy("maximize") == 1.0 and pareto_plot.float_accuracy("minimize") == 0.0
    maximized = pareto_figure(cos._replace(bound=0.95, float_values={"accuracy": 1.0, "latency": 2.0, "size": 4e6}))
    assert "tolerance: ≥ 0.95" in [a.text for a in maximized.layout.annotations]


def test_axis_names_say_what_the_accuracy_value_is() -> None:
    assert accuracy_label("top1", True) == "top1 drop from the float model"
    assert accuracy_label("my_mae", False) == "my_mae rise over the float model"
    assert accuracy_label("cos", None) == "cos to the float model"


def test_two_objectives_one_panel_without_tolerance_or_float_latency() -> None:
    shown = sample(objectives=["accuracy", "latency"], directions=["minimize"] * 2, bound=None,
                   trials=[(0, [0.02, 1.2]), (1, [0.01, 1.5])], winner=1,
                   float_values={"accuracy": 0.0, "latency": None})
    figure = pareto_figure(shown)
    assert names(figure) == ["trial", "Pareto front (all objectives)", "winner: trial 1"]  # no float figure measured
    assert not figure.layout.shapes and figure.data[1].mode == "markers+lines"
    assert pareto_png(shown).startswith(PNG_MAGIC)


def test_the_png_draws_the_same_plot() -> None:
    import io

    from PIL import Image

    png = pareto_png(sample())
    assert png.startswith(PNG_MAGIC)
    width, height = Image.open(io.BytesIO(png)).size
    assert width > 2 * height * 0.9  # two panels side by side


def fake_search(tmp_path: Path) -> Any:
    from compiler.runtime.search import Search
    from compiler.runtime.space import stage_configs

    def measured(model: Path) -> dict:
        ms = {"XInt8Spec": 1.0, "Int8Spec": 1.5, "Int16Spec": 3.0}[json.loads(model.read_text())["activation"]]
        return {"median_ms": ms, "spread_ms": 0.0, "ratio": ms / FLOAT_MS, "ratio_range": [ms / FLOAT_MS] * 2,
                "provider": "CPUExecutionProvider", "threads": 1, "rounds": 6, "method": "interleaved"}

    s = fake_settings(tmp_path, objectives=["accuracy", "latency", "size"], tolerance={"value": 0.2, "relative": False},
                      two_stage=False, sampler="Random", n_trials=5, plots=True)
    search = Search(s)
    search.record_float_objectives({"median_ms": FLOAT_MS, "spread_ms": 0.01, "provider": "CPUExecutionProvider",
                                    "threads": 1}, FLOAT_BYTES)
    fake = FakeQuark()
    search.attach(fake.quantize, fake.score, measured)
    search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs))
    return search


def write_manifest(out: Path, s: Any) -> None:
    """The run_manifest.yaml `qas report` reads, for the fake search's study (what compile would write, in short)."""
    (out / "run_manifest.yaml").write_text(f"""# Generated by qas from spec.yaml. Do not edit.
generated_by: qas
name: "fake"
engine: "qas"
inputs:
  evaluation:
    metric: "L2"
search:
  sampler: "{s.sampler}"
  seed: 0
  direction: "minimize"
  device: "cpu"
budget:
  requested_trials: {s.n_trials}
  effective_trials: {s.n_trials}
  grid_configs: 0
  models_produced: {s.n_trials}
outputs:
  study:
    storage: "journal:{s.study_db}"
    db: "{s.study_db}"
    name: "{s.study_name}"
  best_config: "best_config.json"
run:
  status: "finished"
""", encoding="utf-8")


def test_the_runtime_writes_this_pareto_plot(tmp_path: Path) -> None:
    from compiler.runtime.results import pareto_input, write_best, write_plots

    search = fake_search(tmp_path)
    best = write_best(search)
    shown = pareto_input(search, search.sampler_study)
    assert shown.winner == best["trial_number"] and shown.bound == pytest.approx(0.2)
    assert shown.float_values == {"accuracy": 0.0, "latency": FLOAT_MS, "size": FLOAT_BYTES}
    assert shown.accuracy_label == "L2 to the float model"
    page = page_text(next(p for p in write_plots(search) if p.name == "pareto_front.html"))
    for text in ("L2 to the float model", "size (MB)", "latency (ms per sample)", "float model",
                 f"winner: trial {best['trial_number']}", "tolerance: ≤ 0.2"):
        assert text in page, text


def test_the_report_writes_this_pareto_plot_as_html_and_png(tmp_path: Path) -> None:
    from compiler.report import build_report, write_report_files
    from compiler.runtime.results import write_best

    search = fake_search(tmp_path)
    best = write_best(search)
    write_manifest(tmp_path, search.settings)
    report = build_report(tmp_path)
    written = write_report_files(report, tmp_path)
    assert "report/pareto_front.html" in written and "report/pareto_front.png" in written
    page = page_text(tmp_path / "report" / "pareto_front.html")
    for text in ("L2 to the float model", "size (MB)", "float model", f"winner: trial {best['trial_number']}",
                 "tolerance: ≤ 0.2"):
        assert text in page, text
    assert (tmp_path / "report" / "pareto_front.png").read_bytes().startswith(PNG_MAGIC)


def test_a_bound_far_beyond_every_point_is_a_note_not_a_line_that_squeezes_them() -> None:
    far = sample(bound=100.0)
    figure = pareto_figure(far)
    assert not figure.layout.shapes  # no line at x=100 pulling the axis away from losses of 0.01-0.08
    assert "tolerance: ≤ 100, beyond the axis: every trial is within it" in [a.text for a in figure.layout.annotations]
    assert pareto_plot.tolerance_note(sample(bound=1e-9)).endswith("no trial is within it")
    assert pareto_png(far).startswith(PNG_MAGIC)
