"""The report's history plot: complete trials of both stages on one x-axis in the order they started, and the
best-so-far line, for each objective of a multi-objective search too."""

from __future__ import annotations

from datetime import datetime, timedelta

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from compiler.report.history import best_so_far, history_figure, history_points

T0 = datetime(2026, 12, 4, 10, 0, 0)


def study(name: str, directions: list[str], trials: list[tuple[int, list[float]]]) -> optuna.Study:
    """An in-memory study whose trials started at T0 + the given seconds, with the given values."""
    made = optuna.create_study(study_name=name, directions=directions)
    for second, values in trials:
        start = T0 + timedelta(seconds=second)
        made.add_trial(FrozenTrial(number=0, trial_id=0, state=TrialState.COMPLETE, value=None, values=values,
                                   datetime_start=start, datetime_complete=start + timedelta(seconds=1),
                                   params={"x": 0.5}, distributions={"x": FloatDistribution(0, 1)}, user_attrs={},
                                   system_attrs={}, intermediate_values={}))
    return made


def test_two_workers_interleave_the_stages_and_the_x_axis_follows_the_start_times() -> None:
    # two workers: the sampler stage's first trials started while the grid stage's last ones ran
    grid = study("s-grid", ["minimize"], [(0, [0.5]), (10, [0.4]), (30, [0.6])])
    sampler = study("s", ["minimize"], [(20, [0.3]), (40, [0.35]), (50, [0.1])])
    labels = {"s-grid": "grid stage", "s": "sampler stage"}
    points = history_points([sampler, grid], labels)
    assert [(p.x, p.stage, p.number) for p in points] == [
        (0, "grid stage", 0), (1, "grid stage", 1), (2, "sampler stage", 0), (3, "grid stage", 2),
        (4, "sampler stage", 1), (5, "sampler stage", 2)]
    assert best_so_far(points, maximize=False) == [0.5, 0.4, 0.3, 0.3, 0.3, 0.1]
    assert best_so_far(points, maximize=True) == [0.5, 0.5, 0.5, 0.6, 0.6, 0.6]


def test_a_multi_objective_search_gets_a_best_line_for_each_objective() -> None:
    sampler = study("s", ["minimize", "minimize"], [(0, [0.3, 9.0]), (5, [0.2, 12.0]), (9, [0.25, 4.0])])
    for index, best in ((0, [0.3, 0.2, 0.2]), (1, [9.0, 9.0, 4.0])):
        points = history_points([sampler], {"s": "sampler stage"}, index)
        figure = history_figure(points, False, "latency (ms per sample)")
        line = next(trace for trace in figure.data if trace.name == "best so far (lowest)")
        assert list(line.y) == best and list(line.x) == [0, 1, 2]
        assert figure.layout.xaxis.title.text == "trial, in the order they started (both stages)"


def test_the_report_lines_give_trial_times_and_the_float_model_size_beside_the_winner() -> None:
    from compiler.check.budget_facts import gb
    from compiler.report.text import _beside_float, _durations, _seconds

    assert _seconds(0.257) == "0.257 s" and _seconds(300) == "5.0 min" and _seconds(None) == "-"
    line = _durations({"count": 6, "median_s": 1.98, "min_s": 0.257, "max_s": 7.1, "total_s": 16.6})
    assert line == "median 1.98 s a trial (0.257 s to 7.1 s), 16.6 s over 6 complete trials"
    assert _beside_float(5000, 20000, gb) == f"; float model {gb(20000)} (the winner is 25% of it)"
    assert _beside_float(5000, None, gb) == ""  # an older output folder without model_analysis.json's size
