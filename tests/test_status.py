"""`qas status`'s text from a report: the budget, each worker with what it runs now and for how long, the best so far."""

from __future__ import annotations

from datetime import datetime

from compiler.report.status import status_text


def report(**changes: object) -> dict:
    base = {
        "name": "tiny", "sampler": "TPE", "budget": {"effective_trials": 4, "grid_configs": 3},
        "budget_reached": False, "best": {"value": 0.25, "stage": "sampler", "trial_number": 2},
        "trials": {"complete_sampler": 2, "complete_grid": 3, "running": 1, "waiting": 1, "failed": 0,
                   "interrupted": 1, "retried": 1},
        "workers": {"0@a:1": {"complete": 3, "failed": 0, "interrupted": 1, "running": 0},
                    "1@b:2": {"complete": 2, "failed": 0, "interrupted": 0, "running": 1}},
        "all_trials": [{"state": "RUNNING", "worker": "1@b:2", "stage": "sampler", "number": 5,
                        "started": "2026-12-03T10:00:00"},
                       {"state": "COMPLETE", "worker": "0@a:1", "stage": "grid", "number": 0,
                        "started": "2026-12-03T09:00:00"}],
    }
    return base | changes


def test_status_names_each_worker_what_it_runs_and_the_best_so_far() -> None:
    text = status_text(report(), now=datetime(2026, 12, 3, 10, 0, 42))
    assert text.splitlines() == [
        "tiny: 2 of 4 sampler trials, 3 of 3 grid configs complete (going on)",
        "  1 running, 1 waiting, 0 failed, 1 interrupted, 1 retried",
        "workers:",
        "  0@a:1: 3 complete, 1 interrupted",
        "  1@b:2: 2 complete; running sampler trial 5, 42 s",
        "best so far: 0.25 (sampler trial 2)",
    ]


def test_a_finished_or_stopped_search_says_so() -> None:
    done = report(budget_reached=True, trials=report()["trials"] | {"running": 0, "waiting": 0}, all_trials=[])
    assert "(budget reached)" in status_text(done)
    stopped = report(trials=report()["trials"] | {"running": 0, "waiting": 0}, best=None, workers={}, all_trials=[])
    text = status_text(stopped)
    assert "(stopped)" in text and "best so far: none yet" in text and "workers:" not in text
