"""`qas status`'s text from a report: the budget, each worker with what it runs now and for how long, the best so
far."""

from __future__ import annotations

from datetime import datetime

from compiler.report.status import status_text


def report(**changes: object) -> dict:
    base = {
        "name": "tiny", "sampler": "TPE", "budget": {"effective_trials": 4, "grid_configs": 3},
        "metric": "L2", "direction": "minimize", "higher_is_better": None, "stopped": None, "launcher": None,
        "budget_reached": False, "best": {"value": 0.25, "stage": "sampler", "trial_number": 2},
        "trials": {"complete_sampler": 2, "complete_grid": 3, "running": 1, "waiting": 1, "failed": 0,
                   "interrupted": 1, "retried": 1, "total": 7},
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
        "  1 running, 0 failed, 1 interrupted, 1 retried; 7 trial(s) run; 1 slot(s) queued, not yet run",
        "workers:",
        "  0@a:1: 3 complete, 1 interrupted",
        "  1@b:2: 2 complete; running sampler trial 5, 42 s",
        "best so far: L2 0.25 (lower is better; sampler trial 2)",
    ]


def test_a_finished_stopped_or_abandoned_search_says_which() -> None:
    idle = report()["trials"] | {"running": 0}
    done = report(budget_reached=True, trials=idle, all_trials=[])
    assert "(budget reached)" in status_text(done)
    for reason in ("tolerance", "timeout"):  # a stop rule is not the budget
        stopped = report(budget_reached=True, stopped={"reason": reason}, trials=idle, all_trials=[])
        assert f"(stopped: {reason})" in status_text(stopped) and "budget reached" not in status_text(stopped)
    in_flight = report(budget_reached=True, stopped={"reason": "tolerance"})  # its running trial finishes
    assert "(stopped: tolerance; trials in flight finishing)" in status_text(in_flight)
    # queued slots but no process: an interrupted search, not one going on
    abandoned = report(trials=idle, best=None, workers={}, all_trials=[])
    text = status_text(abandoned)
    assert "(not running)" in text and "best so far: none yet" in text and "workers:" not in text
    assert "re-run the script (or `qas run`) to resume" in text
    assert "(going on)" in status_text(abandoned | {"launcher": "pid 7 on here, since now"})


def test_a_worker_that_is_gone_is_not_shown_running() -> None:
    dead = report()["all_trials"][0] | {"alive": False, "why": "no heartbeat for 727 s (grace period 60 s)"}
    text = status_text(report(all_trials=[dead]), now=datetime(2026, 12, 3, 10, 12, 7))
    assert ("  1@b:2: 2 complete; GONE (no heartbeat for 727 s (grace period 60 s)): sampler trial 5 left RUNNING "
            "(started 727 s ago); the next worker to start takes it back") in text.splitlines()
    assert text.splitlines()[0].endswith("(not running)")


def test_the_best_names_its_objective_and_direction() -> None:
    best = {"value": -0.0255, "stage": "sampler", "trial_number": 2, "score": 0.7755}
    text = status_text(report(metric="top1", direction="minimize", higher_is_better=True, best=best))
    assert "best so far: top1 drop -0.0255 (lower is better; top1 0.7755; sampler trial 2)" in text
    text = status_text(report(metric="cos", direction="maximize", best=best | {"score": None, "value": 0.99}))
    assert "best so far: cos 0.99 (higher is better; sampler trial 2)" in text
