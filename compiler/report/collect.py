"""The report's facts: a search output dir in; the run as plain JSON-ready data out (counts, ranking, the best
trial cross-checked with best_config.json, importances), or a one-line error.

Reads run_manifest.yaml, the Optuna study (opened read-only) and best_config.json; never changes them.
Optuna is imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

from compiler.report.accuracy_steps import accuracy_steps
from compiler.report.manifest import first_line, load_manifest
from compiler.report.status import search_state
from compiler.report.studies import heartbeat_ages, importances, load_studies
from compiler.report.trial_costs import cost_section
from compiler.report.winner import objectives_view, recommend, stopped_record
from compiler.runtime.contract import (
    ATTR_CONFIG,
    ATTR_ERROR,
    ATTR_GRID_INDEX,
    ATTR_INTERRUPTED,
    ATTR_MODEL,
    ATTR_RETRIED_FROM,
    ATTR_REUSED_FROM,
    ATTR_SAMPLES_SEEN,
    ATTR_STAGE,
    ATTR_STEPS,
    ATTR_WORKER,
    BEST_CONFIG_FILE,
    ENGINES,
    FLOAT_SCORE_ATTR,
    GRID_STUDY_SUFFIX,
    MANIFEST_FILE,
    SENSITIVITY_FILE,
    STAGE_GRID,
    STAGE_SAMPLER,
    TASK_METRICS,
    stage_totals,
)
from compiler.runtime.objectives import distinct

TOP_N = 5


def build_report(out_dir: Path) -> dict[str, Any] | str:
    """Output dir in; the report as plain JSON-ready data out, or a one-line error (no manifest, no study, ...)."""
    from optuna.trial import TrialState

    from compiler.runtime.lock import holder

    loaded = _load(out_dir)
    if isinstance(loaded, str):
        return loaded
    manifest, (main, main_trials), (grid, grid_trials) = loaded
    facts = manifest["outputs"]["study"]
    grid_name = facts["name"] + GRID_STUDY_SUFFIX
    notes: list[str] = []

    direction = _direction(main, manifest, notes)
    rows = _rows(grid_trials, grid_name, main_trials, facts["name"], notes)
    numbers = {(r.study, r.trial.number): r.trial for r in rows}
    complete = [r for r in rows if r.trial.state == TrialState.COMPLETE]
    failed = [r for r in rows if r.trial.state == TrialState.FAIL and not r.trial.user_attrs.get(ATTR_INTERRUPTED)]
    counts = _trial_counts(rows, complete, failed)
    alive = _liveness(rows, facts)
    notes += _running_notes(counts["running"], alive)
    best_config_name, saved, best_config_state = _saved_best_config(out_dir, manifest, notes)
    ranked, recommended = _ranked(complete, direction, saved)
    entries = _distinct(ranked)  # each configuration once: a repeat answered from the study is not a runner-up
    best, agrees = _best_of(ranked, saved, numbers, (facts["name"], grid_name if grid else None),
                            best_config_name, out_dir, notes)
    evaluation, higher_is_better, float_score = _scoring(manifest, [main, grid], saved)
    if best is not None:
        best["score"] = _score(best["value"], float_score, higher_is_better)
    stopped = stopped_record(saved, [main])
    report = {
        **_identity(out_dir, manifest, direction, evaluation, float_score),
        **_study_and_budget(manifest, grid is not None),
        "trials": counts,
        "budget_reached": _budget_reached(counts, manifest) or bool(stopped),
        "stopped": stopped,
        "objectives": objectives_view(saved, recommended, out_dir),
        "best": best,
        "best_config_agrees": agrees,
        # absent (not written yet: the search writes it when it ends), unreadable, agrees or disagrees
        "best_config": best_config_state if best_config_state != "written" else "agrees" if agrees else "disagrees",
        "float_model_bytes": _float_model_bytes(out_dir),
        "durations": _durations([r.trial for r in complete]),
        "cost": cost_section([r.trial for r in rows if r.trial.state in (TrialState.COMPLETE, TrialState.PRUNED)],
                             main.user_attrs),
        "top5": [_top_entry(r, repeats, numbers, float_score, higher_is_better, out_dir)
                 for r, repeats in entries[:TOP_N]],
        "failures": _failures(failed),
        **_importance_view(main, grid, complete, notes),
        "workers": _workers(rows),
        "all_trials": [_trial_row(r, numbers) | alive.get((r.study, r.trial.number), {}) for r in rows],
        "launcher": holder(out_dir / facts["db"]),  # the live process that runs the search here, if any
        "sensitivity": _sensitivity(out_dir, saved),
        "accuracy_control": accuracy_steps([r.trial for r in complete if r.study == facts["name"]], stopped),
        "notes": notes,
    }
    return report | {"state": search_state(report)}


def _study_and_budget(manifest: dict[str, Any], has_grid: bool) -> dict[str, Any]:
    """The manifest in; the report's study (names, where) and compiled budget sections out."""
    facts, budget = manifest["outputs"]["study"], manifest["budget"]
    return {"study": {"db": facts["db"], "name": facts["name"],
                      "grid_name": facts["name"] + GRID_STUDY_SUFFIX if has_grid else None,
                      "url_env": facts.get("url_env")},
            "budget": {"effective_trials": budget["effective_trials"], "grid_configs": budget["grid_configs"],
                       "models_produced": budget.get("models_produced")}}


def _direction(main: Any, manifest: dict[str, Any], notes: list[str]) -> str:
    """The main study and the manifest in; the accuracy objective's direction as the study has it out (a note when the
    manifest says otherwise: the study ranks)."""
    direction = main.directions[0].name.lower()
    if direction != manifest["search"]["direction"]:
        notes.append(f"{MANIFEST_FILE} says {manifest['search']['direction']} but the study {direction}s; "
                     f"ranked as the study does")
    return direction


def _importance_view(main: Any, grid: Any, complete: list[_Row], notes: list[str]) -> dict[str, Any]:
    """The studies and their complete rows in; the report's importances and the study they were computed over out:
    the sampler stage's study, or the grid study when only that has trials (sampler Grid). What the computation
    says about itself is appended to notes."""
    source = main if any(r.study == main.study_name for r in complete) or grid is None else grid
    found, importance_notes = importances(source, [r.trial for r in complete if r.study == source.study_name])
    notes += importance_notes
    return {"importances": found, "importances_study": source.study_name if found else None}


def _ranked(complete: list[_Row], direction: str, saved: dict[str, Any] | None) -> tuple[list[_Row], Any]:
    """The complete trials, the study's direction and the saved best_config in; the trials best first (by the winner
    rule when the search declared one, as the search ranked them; else by value) and that rule's ranking out."""
    ranked = sorted(complete, key=lambda r: _value(r.trial), reverse=direction == "maximize")
    recommended = recommend(saved, direction, [r.trial for r in complete])
    if recommended is not None:
        order = {id(t): k for k, t in enumerate(recommended["ranking"])}
        ranked = sorted(complete, key=lambda r: order.get(id(r.trial), len(order)))
    return ranked, recommended


def _scoring(manifest: dict[str, Any], studies: list[Any], saved: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    """The manifest, the studies and the saved best_config in; (the manifest's evaluation section, whether a higher
    value is better, the float model's score or None) out."""
    inputs = manifest.get("inputs")
    evaluation = inputs.get("evaluation") if isinstance(inputs, dict) else None
    higher_is_better = _higher_is_better(evaluation)
    return evaluation, higher_is_better, _float_score(higher_is_better, studies, saved)


def _failures(failed: list[_Row]) -> list[dict[str, Any]]:
    """The failed trials (not the interrupted ones): number, stage and recorded error."""
    return [{"number": r.trial.number, "stage": r.stage, "error": r.trial.user_attrs.get(ATTR_ERROR)} for r in failed]


def _load(out_dir: Path) -> tuple[dict[str, Any], tuple[Any, list[Any]], tuple[Any, list[Any]]] | str:
    """The manifest and the two studies with their trials (the grid study (None, []) when there is none), or a
    one-line error."""
    manifest = load_manifest(out_dir / MANIFEST_FILE)
    if isinstance(manifest, str):
        return manifest
    facts = manifest["outputs"]["study"]
    loaded = load_studies(out_dir / facts["db"], facts["name"], facts["name"] + GRID_STUDY_SUFFIX,
                          facts.get("url_env"), manifest["engine"])
    if isinstance(loaded, str):
        return loaded
    return manifest, loaded[0], loaded[1] if len(loaded) == 2 else (None, [])


def _identity(out_dir: Path, manifest: dict[str, Any], direction: str, evaluation: Any,
              float_score: float | None) -> dict[str, Any]:
    """What ran and how it is scored: the output folder, name, engine, direction, metric, float score, sampler,
    device and the run's status."""
    run = manifest.get("run")
    return {
        "out_dir": str(out_dir),
        "out_dir_shown": _shown_dir(manifest, out_dir),
        "name": manifest["name"],
        "engine": manifest["engine"],
        "grid_outside_study": bool(getattr(ENGINES.get(manifest["engine"]), "quark_loop", False)),
        "direction": direction,
        "metric": _metric(evaluation),
        "higher_is_better": _higher_is_better(evaluation),
        "float_score": float_score,
        "sampler": manifest["search"].get("sampler"),
        "device": manifest["search"].get("device"),
        "run_status": run.get("status") if isinstance(run, dict) else None,
    }


def _budget_reached(counts: dict[str, int], manifest: dict[str, Any]) -> bool:
    """Each stage done as the search counts it (contract.stage_totals, the one place the totals are computed): with
    sampler Grid the configurations (engine qas keeps them in the grid study), else the grid configurations (unless
    Quark runs them outside the study) and the complete and pruned sampler trials (search.prune)."""
    budget, sampler = manifest["budget"], manifest["search"].get("sampler")
    grid_total, sampler_total = stage_totals(sampler or "", bool(budget["grid_configs"]), budget["effective_trials"],
                                             budget["grid_configs"])
    if sampler == "Grid":
        return counts["complete_grid"] + counts["complete_sampler"] >= grid_total
    grid_done = (counts["complete_grid"] >= grid_total
                 or bool(getattr(ENGINES.get(manifest["engine"]), "quark_loop", False)))
    return grid_done and counts["complete_sampler"] + counts["pruned"] >= sampler_total


def _saved_best_config(out_dir: Path, manifest: dict[str, Any], notes: list[str]) -> tuple[str, Any, str]:
    """best_config.json's name, its content (None when absent or unreadable, said in `notes`) and its state:
    absent, unreadable or written."""
    name = manifest["outputs"].get("best_config", BEST_CONFIG_FILE)
    saved = _load_json(out_dir / name)
    state = "absent" if saved is None else "unreadable" if isinstance(saved, str) else "written"
    if isinstance(saved, str):
        notes.append(saved)
        saved = None
    return name, saved, state


def _rows(grid_trials: list[Any], grid_name: str, main_trials: list[Any], main_name: str,
          notes: list[str]) -> list[_Row]:
    """Both studies' trials in; one row each with its stage out, the grid study first (a stable sort then ranks ties
    as the search script does); main-study trials without a stage are noted and counted as sampler trials."""
    from optuna.trial import TrialState

    rows = [_Row(t, STAGE_GRID, grid_name) for t in grid_trials] + [
        _Row(t, STAGE_GRID if t.user_attrs.get(ATTR_STAGE) == STAGE_GRID else STAGE_SAMPLER, main_name)
        for t in main_trials]
    unstaged = sum(1 for r in rows if r.study == main_name and ATTR_STAGE not in r.trial.user_attrs
                   and r.trial.state != TrialState.WAITING)  # a queued slot has no stage until a worker runs it
    if unstaged:
        notes.append(f"{unstaged} trial(s) carry no stage attribute and are counted as sampler trials")
    return rows


def _running_notes(running: int, alive: dict[Any, dict[str, Any]]) -> list[str]:
    """The RUNNING trials and whether their workers live in; what the report should say about them out."""
    notes = []
    gone = sum(1 for found in alive.values() if found["alive"] is False)
    if gone:
        notes.append(f"{gone} trial(s) left RUNNING by a worker that is gone: the next worker to start takes "
                     f"{'it' if gone == 1 else 'them'} back (re-run to resume)")
    if running > gone:
        notes.append(f"{running - gone} trial(s) still RUNNING: the search is going on")
    return notes


def _trial_counts(rows: list[_Row], complete: list[_Row], failed: list[_Row]) -> dict[str, int]:
    """The study's rows in; how many trials are in each state (and retried, reused, run) out."""
    from optuna.trial import TrialState

    return {
        "complete_sampler": sum(1 for r in complete if r.stage == STAGE_SAMPLER),
        "complete_grid": sum(1 for r in complete if r.stage == STAGE_GRID),
        "failed": len(failed),
        "interrupted": sum(1 for r in rows if r.trial.state == TrialState.FAIL) - len(failed),
        "running": sum(1 for r in rows if r.trial.state == TrialState.RUNNING),
        "pruned": sum(1 for r in rows if r.trial.state == TrialState.PRUNED),
        "waiting": sum(1 for r in rows if r.trial.state == TrialState.WAITING),  # queued slots, not trials run
        "retried": sum(1 for r in rows if ATTR_RETRIED_FROM in r.trial.user_attrs),
        "reused": sum(1 for r in complete if ATTR_REUSED_FROM in r.trial.user_attrs),
        "total": sum(1 for r in rows if r.trial.state != TrialState.WAITING),  # trials run (or running)
    }


def _best_of(ranked: list[_Row], saved: dict[str, Any] | None, numbers: dict[tuple[str, int], Any],
             studies: tuple[str, str | None], best_config_name: str, out_dir: Path,
             notes: list[str]) -> tuple[dict[str, Any] | None, bool]:
    """The ranked complete trials and best_config.json in; the best trial's entry and whether the file agrees with
    it out (None, False without complete trials); what disagrees is added to `notes`."""
    if not ranked:
        notes.append("no complete trials yet")
        return None, False
    top = ranked[0]
    agrees = saved is not None and _agrees(saved, top, numbers, *studies)
    best = _best(top, numbers, saved if agrees else None, saved, out_dir)
    if saved is None:
        notes.append(f"no {best_config_name}: the search has not written its summary yet")
    elif not agrees:
        notes.append(f"{best_config_name} names trial {saved.get('trial_number')} with value "
                     f"{saved.get('value')}, but the best is {top.stage} trial {top.trial.number} "
                     f"with value {_value(top.trial)}")
    return best, agrees


def _top_entry(r: _Row, repeats: Any, numbers: dict[tuple[str, int], Any], float_score: float | None,
               higher_is_better: bool | None, out_dir: Path) -> dict[str, Any]:
    """One distinct configuration of the top 5 in; its report entry out."""
    model = _model_of(r, numbers)
    return {"number": r.trial.number, "value": _value(r.trial), "stage": r.stage, "params": r.trial.params,
            "score": _score(_value(r.trial), float_score, higher_is_better),
            "config": r.trial.user_attrs.get(ATTR_CONFIG), "model": model,
            "model_exists": model is not None and (out_dir / model).is_file(),
            "reused_from": r.trial.user_attrs.get(ATTR_REUSED_FROM), "repeated_by": repeats,
            "duration_s": _duration(r.trial)}


def _liveness(rows: list[_Row], facts: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """Each RUNNING trial's worker, alive or gone: {"alive": True | False | None (cannot tell), "why": ...}. On
    PostgreSQL the age of its heartbeat against the grace period; on this machine, whether the worker's process
    holds its lock (lock.worker_is_dead); a journal's worker on another machine cannot be told."""
    from compiler.runtime.contract import DEFAULT_GRACE_SECONDS
    from compiler.runtime.lock import worker_is_dead

    running = [r for r in rows if r.trial.state.name == "RUNNING"]
    if not running:
        return {}
    url_env = facts.get("url_env")
    ages = heartbeat_ages(url_env, sorted({r.study for r in running})) if url_env else {}
    grace = facts.get("grace_period_s") or DEFAULT_GRACE_SECONDS
    found = {}
    for r in running:
        worker = r.trial.user_attrs.get(ATTR_WORKER)
        age = ages.get((r.study, r.trial.number))
        dead = worker_is_dead(worker) if isinstance(worker, str) else None
        pid = worker.rsplit(":", 1)[-1] if isinstance(worker, str) else "?"
        if dead:
            entry = {"alive": False, "why": f"its process {pid} has ended"}
        elif age is not None and age > grace:
            entry = {"alive": False, "why": f"no heartbeat for {age:.0f} s (grace period {grace:g} s)"}
        elif dead is False or age is not None:
            entry = {"alive": True, "why": f"process {pid} runs" if dead is False else f"heartbeat {age:.0f} s ago"}
        elif worker is None:
            entry = {"alive": None, "why": "no worker recorded"}
        else:
            entry = {"alive": None, "why": "on another machine, with no heartbeat to tell" if not url_env
                     else "no heartbeat recorded yet"}
        found[(r.study, r.trial.number)] = entry | {"heartbeat_age": age}
    return found


def _distinct(ranked: list[_Row]) -> list[tuple[_Row, list[int]]]:
    """Rows in rank order in; each configuration once (the trial that really quantized it, at its best rank) with
    the numbers of the trials that repeated it, out."""
    rows = {id(r.trial): r for r in ranked}
    return [(rows[id(t)], repeats) for t, repeats in distinct([r.trial for r in ranked])]


def _value(trial: Any) -> float | None:
    """A trial's accuracy value: its only value, or the first of several (search.objectives); None for a PRUNED one
    (Optuna keeps its last reported sample's score there, not a score of the trial)."""
    return trial.values[0] if trial.values and trial.state.name != "PRUNED" else None


def _trial_row(r: _Row, numbers: dict[tuple[str, int], Any]) -> dict[str, Any]:
    """One trial as `qas report --format json` lists it, so a reviewer can check that nothing ran twice."""
    a = r.trial.user_attrs
    return {"number": r.trial.number, "study": r.study, "stage": r.stage, "state": r.trial.state.name,
            "value": _value(r.trial), "config": a.get(ATTR_CONFIG), "grid_index": a.get(ATTR_GRID_INDEX),
            "worker": a.get(ATTR_WORKER), "model": _model_of(r, numbers), "reused_from": a.get(ATTR_REUSED_FROM),
            "retried_from": a.get(ATTR_RETRIED_FROM), "interrupted": bool(a.get(ATTR_INTERRUPTED)),
            "error": a.get(ATTR_ERROR),
            "started": r.trial.datetime_start.isoformat(timespec="seconds") if r.trial.datetime_start else None,
            "duration_s": _duration(r.trial), "steps": a.get(ATTR_STEPS), "samples_seen": a.get(ATTR_SAMPLES_SEEN)}


def _duration(trial: Any) -> float | None:
    """A finished trial's wall time in seconds (start to end, as Optuna recorded them); None while it runs."""
    if trial.datetime_start is None or trial.datetime_complete is None:
        return None
    return round((trial.datetime_complete - trial.datetime_start).total_seconds(), 3)


def _durations(complete: list[Any]) -> dict[str, Any] | None:
    """The complete trials in; their wall times (median, shortest, longest, sum, how many) out, None without any."""
    import statistics

    found = sorted(d for d in (_duration(t) for t in complete) if d is not None)
    if not found:
        return None
    return {"count": len(found), "median_s": statistics.median(found), "min_s": found[0], "max_s": found[-1],
            "total_s": round(sum(found), 3)}


def _shown_dir(manifest: dict[str, Any], out_dir: Path) -> str:
    """The output folder as the spec names it (output.dir, relative to the spec), never an absolute temp path; the
    folder's own name when the spec gave an absolute one."""
    written = (manifest.get("outputs") or {}).get("dir")
    if isinstance(written, str) and written and not Path(written).is_absolute():
        return written
    return out_dir.resolve().name


def _float_model_bytes(out_dir: Path) -> int | None:
    """The float model's size (with its external data) as intake measured it, from model_analysis.json."""
    from compiler.runtime.contract import MODEL_ANALYSIS_FILE

    data = _load_json(out_dir / MODEL_ANALYSIS_FILE)
    size = data.get("size_bytes") if isinstance(data, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _workers(rows: list[_Row]) -> dict[str, dict[str, int]]:
    """Per worker ("<index>@<host>:<pid>"): its complete, pruned, failed, interrupted and running trials."""
    found: dict[str, dict[str, int]] = {}
    for r in rows:
        worker = r.trial.user_attrs.get(ATTR_WORKER)
        if worker is None or r.trial.state.name == "WAITING":
            continue
        counts = found.setdefault(worker, {"complete": 0, "pruned": 0, "failed": 0, "interrupted": 0, "running": 0})
        state = r.trial.state.name
        if state in ("COMPLETE", "PRUNED"):
            counts[state.lower()] += 1
        elif state == "RUNNING":
            counts["running"] += 1
        elif state == "FAIL":
            counts["interrupted" if r.trial.user_attrs.get(ATTR_INTERRUPTED) else "failed"] += 1
    return dict(sorted(found.items()))


def _sensitivity(out_dir: Path, saved: dict[str, Any] | None) -> dict[str, Any] | None:
    """sensitivity.json's ranking (its top groups, method and cost) and what the winner kept in float; None without
    one."""
    data = _load_json(out_dir / SENSITIVITY_FILE)
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        return None
    stem = (out_dir / SENSITIVITY_FILE).with_suffix("")
    return {"method": data.get("method"), "samples": data.get("samples"), "baseline_error": data.get("baseline_error"),
            "cost": data.get("cost"), "notes": data.get("notes") or [],
            "top": [{"name": g.get("name"), "score": g.get("score"), "noise": g.get("noise"),
                     "above_noise": g.get("above_noise", True)} for g in data["groups"][:TOP_N]],
            "charts": [f"{stem.name}{ext}" for ext in (".html", ".png") if stem.with_suffix(ext).is_file()],
            "winner_keeps": (saved or {}).get("keep_float")}


class _Row(NamedTuple):
    """One trial of the run, with the stage it belongs to and the study that holds it."""

    trial: Any  # optuna FrozenTrial
    stage: str  # STAGE_GRID | STAGE_SAMPLER
    study: str


def _load_json(path: Path) -> dict[str, Any] | str | None:
    """A JSON file in; its object out, None when absent, or a note when unreadable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{path.name} is unreadable ({first_line(exc)}); ignored"
    return data if isinstance(data, dict) else f"{path.name} is not a JSON object; ignored"


def _model_of(row: _Row, numbers: dict[tuple[str, int], Any]) -> str | None:
    """A trial in; the model file it scored out (a reused score points at the trial that made the model)."""
    model = row.trial.user_attrs.get(ATTR_MODEL)
    source = numbers.get((row.study, row.trial.user_attrs.get(ATTR_REUSED_FROM)))
    if model is None and source is not None:
        model = source.user_attrs.get(ATTR_MODEL)
    return model if isinstance(model, str) else None


def _agrees(saved: dict[str, Any], best: _Row, numbers: dict[tuple[str, int], Any], name: str,
            grid_name: str | None) -> bool:
    """best_config.json names the best value, and a trial that scored it (ties count) or none."""
    value = saved.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isclose(value, _value(best.trial)):
        return False
    number = saved.get("trial_number")
    if number is None:  # AutoSearchPro's grid winner has no trial number
        return True
    study = saved.get("study")
    if not isinstance(study, str):
        study = grid_name if saved.get("stage") == STAGE_GRID and grid_name is not None else name
    named = numbers.get((study, number)) if isinstance(number, int) and not isinstance(number, bool) else None
    return named is not None and _value(named) is not None and math.isclose(_value(named), _value(best.trial))


def _best(row: _Row, numbers: dict[tuple[str, int], Any], agreed: dict[str, Any] | None,
          saved: dict[str, Any] | None, out_dir: Path) -> dict[str, Any]:
    """The best trial in; its facts out, filled from best_config.json only where that file agrees."""
    config = row.trial.user_attrs.get(ATTR_CONFIG)
    model = _model_of(row, numbers)
    if agreed is not None:
        config = agreed.get("config") if config is None else config
        model = agreed.get("model") if model is None else model
    best_model = saved.get("best_model") if saved is not None else None
    model_bytes = _size(out_dir, model)
    best_model_bytes = _size(out_dir, best_model)
    return {
        "trial_number": row.trial.number,
        "study": row.study,
        "value": _value(row.trial),
        "stage": row.stage,
        "reused_from": row.trial.user_attrs.get(ATTR_REUSED_FROM),
        "config": config,
        "model": model,
        "model_exists": model_bytes is not None,
        "model_bytes": model_bytes,
        "best_model": best_model if isinstance(best_model, str) else None,
        "best_model_exists": best_model_bytes is not None,
        "best_model_bytes": best_model_bytes,
    }


def _size(out_dir: Path, name: Any) -> int | None:
    """A file name relative to the output dir in; its size out, None when it is not there."""
    if not isinstance(name, str) or not name:
        return None
    try:
        return (out_dir / name).stat().st_size if (out_dir / name).is_file() else None
    except OSError:
        return None


def _metric(evaluation: Any) -> str | None:
    if not isinstance(evaluation, dict):
        return None
    found = evaluation.get("metric") or evaluation.get("function")
    return found if isinstance(found, str) else None


def _higher_is_better(evaluation: Any) -> bool | None:
    """The manifest's inputs.evaluation in; a user evaluator's higher_is_better out (None for a built-in metric)."""
    if isinstance(evaluation, dict) and evaluation.get("metric") in TASK_METRICS:
        return True  # top1/top5: accuracy, higher is better; trial values are its drop
    if not isinstance(evaluation, dict) or not evaluation.get("evaluator"):
        return None
    found = evaluation.get("higher_is_better")
    return found if isinstance(found, bool) else None


def _float_score(higher_is_better: bool | None, studies: list[Any], saved: dict[str, Any] | None) -> float | None:
    """The float model's score under the user evaluator, as the search recorded it (a study attribute, else
    best_config.json), out; None for a built-in metric or when the run did not record it."""
    if higher_is_better is None:
        return None
    found = [study.user_attrs.get(FLOAT_SCORE_ATTR) for study in studies if study is not None]
    found.append(saved.get(FLOAT_SCORE_ATTR) if saved is not None else None)
    return next((float(v) for v in found if _finite(v)), None)


def _score(value: Any, float_score: float | None, higher_is_better: bool | None) -> float | None:
    """A trial's value (the drop from the float score, or with lower-is-better the rise over it) in; the quantized
    model's own score under the evaluator out, when the float score is known."""
    if float_score is None or higher_is_better is None or not _finite(value):
        return None
    return float_score - value if higher_is_better else float_score + value


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
