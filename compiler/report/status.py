"""`qas status`: a report (build_report's data) in; a short text of where a running search stands out — the budget,
whether it is going on, stopped by a rule, done or not running, each worker's trials and what it runs now (or left
behind when it died), failures and retries, queued slots apart from trials run, the best so far by its objective.
Reads nothing itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any

# What `qas status --format json` gives: the report's keys a status needs
JSON_KEYS = ("name", "state", "budget", "trials", "budget_reached", "stopped", "launcher", "metric", "direction",
             "higher_is_better", "best", "workers", "all_trials")


def search_state(r: dict[str, Any]) -> str:
    """The report in; "stopped: <rule>", "budget reached", "going on" or "not running" out.

    Going on: a live process holds the search's lock here, or a RUNNING trial's worker lives (or cannot be told
    dead). Queued slots alone say nothing: an interrupted search leaves its slots queued."""
    stopped = r.get("stopped")
    live = any(t["state"] == "RUNNING" and t.get("alive", True) is not False for t in r["all_trials"])
    if stopped:  # a stop rule lets the trials in flight finish
        return f"stopped: {stopped.get('reason', '?')}" + ("; trials in flight finishing" if live else "")
    if r.get("launcher") or live:
        return "budget reached, finishing" if r["budget_reached"] else "going on"
    return "budget reached" if r["budget_reached"] else "not running"


def best_line(r: dict[str, Any]) -> str:
    """The best so far, named: its objective (the metric, or its drop from / rise over the float model's score for a
    user evaluator) and which way is better."""
    best = r["best"]
    if best is None:
        return "best so far: none yet"
    metric, higher = r.get("metric") or "value", r.get("higher_is_better")
    objective = metric if higher is None else f"{metric} {'drop' if higher else 'rise'}"
    better = "lower" if r.get("direction", "minimize") == "minimize" else "higher"
    score = best.get("score")
    own = f"; {metric} {score:.6g}" if score is not None else ""
    return (f"best so far: {objective} {best['value']:.6g} ({better} is better{own}; "
            f"{best['stage']} trial {best['trial_number']})")


def status_text(r: dict[str, Any], now: datetime | None = None) -> str:
    """The status lines for a report dict (see report.facts.build_report)."""
    t, b = r["trials"], r["budget"]
    now = now or datetime.now()
    if r["sampler"] == "Grid":
        progress = f"{t['complete_grid'] + t['complete_sampler']} of {b['effective_trials']} grid configs"
    else:
        progress = f"{t['complete_sampler']} of {b['effective_trials']} sampler trials"
        if t.get("pruned"):  # search.prune: pruned trials count toward the budget
            progress = (f"{t['complete_sampler'] + t['pruned']} of {b['effective_trials']} sampler trials "
                        f"({t['pruned']} of them pruned)")
        if b["grid_configs"]:
            progress += f", {t['complete_grid']} of {b['grid_configs']} grid configs"
    state = r.get("state") or search_state(r)
    counts = ", ".join(f"{t.get(k, 0)} {k}" for k in ("running", "failed", "interrupted", "retried"))
    run = t.get("total")
    counts += (f"; {run} trial(s) run" if run is not None else "") + (
        f"; {t['waiting']} slot(s) queued, not yet run" if t.get("waiting") else "")
    lines = [f"{r['name']}: {progress} complete ({state})", "  " + counts]
    if state == "not running" and not r["budget_reached"]:
        lines.append("  no process runs it: re-run the script (or `qas run`) to resume")
    running: dict[str, dict[str, Any]] = {}
    for trial in r["all_trials"]:
        if trial["state"] == "RUNNING" and trial["worker"]:
            running[trial["worker"]] = trial
    if r["workers"]:
        lines.append("workers:")
        for worker, worker_counts in r["workers"].items():
            line = f"  {worker}: {worker_counts['complete']} complete"
            line += "".join(f", {worker_counts[k]} {k}" for k in ("pruned", "failed", "interrupted")
                            if worker_counts.get(k))
            doing = running.get(worker)
            if doing is not None:
                line += "; " + _doing(doing, now)
            lines.append(line)
    lines.append(best_line(r))
    return "\n".join(lines) + "\n"


def _doing(trial: dict[str, Any], now: datetime) -> str:
    """A RUNNING trial of a worker: what it runs and for how long, or that the worker is gone and left it."""
    since = ""
    if trial["started"]:
        since = f"{int((now - datetime.fromisoformat(trial['started'])).total_seconds())} s"
    what = f"{trial['stage']} trial {trial['number']}"
    alive, why = trial.get("alive", True), trial.get("why")
    if alive is False:
        return (f"GONE ({why}): {what} left RUNNING{f' (started {since} ago)' if since else ''}; the next worker "
                "to start takes it back")
    text = f"running {what}{', ' + since if since else ''}"
    return text + (f" (alive? cannot tell: {why})" if alive is None and why else "")
