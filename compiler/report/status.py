"""`qas status`: a report (build_report's data) in; a short text of where a running search stands out — the budget,
each worker's trials and what it runs now, failures and retries, the best so far. Reads nothing itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def status_text(r: dict[str, Any], now: datetime | None = None) -> str:
    """The status lines for a report dict (see report.facts.build_report)."""
    t, b = r["trials"], r["budget"]
    now = now or datetime.now()
    if r["sampler"] == "Grid":
        progress = f"{t['complete_grid'] + t['complete_sampler']} of {b['effective_trials']} grid configs"
    else:
        progress = f"{t['complete_sampler']} of {b['effective_trials']} sampler trials"
        if b["grid_configs"]:
            progress += f", {t['complete_grid']} of {b['grid_configs']} grid configs"
    state = "budget reached" if r["budget_reached"] else "going on" if t["running"] or t.get("waiting") else "stopped"
    lines = [f"{r['name']}: {progress} complete ({state})",
             "  " + ", ".join(f"{t.get(k, 0)} {k}" for k in ("running", "waiting", "failed", "interrupted", "retried"))]
    running = {}
    for trial in r["all_trials"]:
        if trial["state"] == "RUNNING" and trial["worker"]:
            running[trial["worker"]] = trial
    if r["workers"]:
        lines.append("workers:")
        for worker, counts in r["workers"].items():
            line = f"  {worker}: {counts['complete']} complete"
            line += "".join(f", {counts[k]} {k}" for k in ("failed", "interrupted") if counts[k])
            doing = running.get(worker)
            if doing is not None:
                since = ""
                if doing["started"]:
                    since = f", {int((now - datetime.fromisoformat(doing['started'])).total_seconds())} s"
                line += f"; running {doing['stage']} trial {doing['number']}{since}"
            lines.append(line)
    best = r["best"]
    lines.append("best so far: " + ("none yet" if best is None else
                                    f"{best['value']:.6g} ({best['stage']} trial {best['trial_number']})"))
    return "\n".join(lines) + "\n"
