"""`qas report`: a search output dir in; the run as JSON-ready data, a terminal block, or plots and report.md out.

Reads run_manifest.yaml, the Optuna study (opened read-only) and best_config.json; never changes them.
Optuna, matplotlib, jsonschema and ruamel are imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import tempfile
import warnings
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from .resources import templates_dir

MANIFEST = "run_manifest.yaml"
PLOTS_DIR = "report"
GRID_SUFFIX = "-grid"  # engine qas keeps grid-stage trials in study <name>-grid (autosearch_qas.py.j2)
TOP_N = 5
PLOTS = {"history_html": f"{PLOTS_DIR}/optimization_history.html",
         "history_png": f"{PLOTS_DIR}/optimization_history.png",
         "importances_html": f"{PLOTS_DIR}/param_importances.html"}
ROUGH_BELOW = 50  # PED-ANOVA wants >= 5 trials in its top 10 %, so importances from fewer trials are rough

_INT = {"type": "integer", "minimum": 0}
_MANIFEST_SCHEMA = {  # only the keys the report reads; anything else in the manifest is ignored
    "type": "object",
    "required": ["name", "engine", "search", "budget", "outputs"],
    "properties": {
        "name": {"type": "string"},
        "engine": {"type": "string"},
        "search": {"type": "object", "required": ["direction"],
                   "properties": {"direction": {"enum": ["minimize", "maximize"]}}},
        "budget": {"type": "object", "required": ["effective_trials", "grid_configs"],
                   "properties": {"effective_trials": _INT, "grid_configs": _INT, "models_produced": _INT}},
        "outputs": {"type": "object", "required": ["study"], "properties": {
            "best_config": {"type": "string", "minLength": 1},
            "study": {"type": "object", "required": ["db", "name"],
                      "properties": {"db": {"type": "string", "minLength": 1}, "name": {"type": "string"},
                                     "grid_name": {"type": "string"}}}}},
    },
}


def build_report(out_dir: Path) -> dict[str, Any] | str:
    """Output dir in; the report as plain JSON-ready data out, or a one-line error (no manifest, no study, ...)."""
    from optuna.trial import TrialState

    manifest = _load_manifest(out_dir / MANIFEST)
    if isinstance(manifest, str):
        return manifest
    facts = manifest["outputs"]["study"]
    grid_name = facts.get("grid_name", facts["name"] + GRID_SUFFIX)
    loaded = load_studies(out_dir / facts["db"], facts["name"], grid_name)
    if isinstance(loaded, str):
        return loaded
    (main, main_trials), (grid, grid_trials) = loaded[0], loaded[1] if len(loaded) == 2 else (None, [])
    notes: list[str] = []

    direction = main.direction.name.lower()
    if direction != manifest["search"]["direction"]:
        notes.append(f"{MANIFEST} says {manifest['search']['direction']} but the study {direction}s; "
                     f"ranked as the study does")
    # grid study first, then the main one, and a stable sort: ties rank as the search script ranks them
    rows = [_Row(t, "grid", grid_name) for t in grid_trials] + [
        _Row(t, "grid" if t.user_attrs.get("stage") == "grid" else "sampler", facts["name"]) for t in main_trials]
    numbers = {(r.study, r.trial.number): r.trial for r in rows}
    complete = [r for r in rows if r.trial.state == TrialState.COMPLETE]
    ranked = sorted(complete, key=lambda r: r.trial.value, reverse=direction == "maximize")
    failed = [r for r in rows if r.trial.state == TrialState.FAIL and not r.trial.user_attrs.get("interrupted")]
    unstaged = sum(1 for r in rows if r.study == facts["name"] and "stage" not in r.trial.user_attrs)
    if unstaged:
        notes.append(f"{unstaged} trial(s) carry no stage attribute and are counted as sampler trials")
    counts = {
        "complete_sampler": sum(1 for r in complete if r.stage == "sampler"),
        "complete_grid": sum(1 for r in complete if r.stage == "grid"),
        "failed": len(failed),
        "interrupted": sum(1 for r in rows if r.trial.state == TrialState.FAIL) - len(failed),
        "running": sum(1 for r in rows if r.trial.state == TrialState.RUNNING),
        "pruned": sum(1 for r in rows if r.trial.state == TrialState.PRUNED),
        "reused": sum(1 for r in complete if "reused_from" in r.trial.user_attrs),
        "total": len(rows),
    }
    if counts["running"]:
        notes.append(f"{counts['running']} trial(s) still RUNNING: the search is going on, or was killed")
    budget, sampler = manifest["budget"], manifest["search"].get("sampler")
    # with sampler Grid the configurations are the trials, and engine qas keeps them in the grid study
    counted = counts["complete_grid"] + counts["complete_sampler"] if sampler == "Grid" else counts["complete_sampler"]

    best_config_name = manifest["outputs"].get("best_config", "best_config.json")
    saved = _load_json(out_dir / best_config_name)
    if isinstance(saved, str):
        notes.append(saved)
        saved = None
    best, agrees = None, False
    if ranked:
        top = ranked[0]
        agrees = saved is not None and _agrees(saved, top, numbers, facts["name"], grid_name if grid else None)
        best = _best(top, numbers, saved if agrees else None, saved, out_dir)
        if saved is None:
            notes.append(f"no {best_config_name}: the search has not written its summary yet")
        elif not agrees:
            notes.append(f"{best_config_name} names trial {saved.get('trial_number')} with value "
                         f"{saved.get('value')}, but the best is {top.stage} trial {top.trial.number} "
                         f"with value {top.trial.value}")
    else:
        notes.append("no complete trials yet")
    # importances over the sampler stage's study; over the grid study when only that has trials (sampler Grid)
    source = main if any(r.study == facts["name"] for r in complete) or grid is None else grid
    importances, importance_notes = _importances(source, [r.trial for r in complete if r.study == source.study_name])
    notes += importance_notes

    run, inputs = manifest.get("run"), manifest.get("inputs")
    evaluation = inputs.get("evaluation") if isinstance(inputs, dict) else None
    return {
        "out_dir": str(out_dir),
        "name": manifest["name"],
        "engine": manifest["engine"],
        "direction": direction,
        "metric": _metric(evaluation),
        "sampler": sampler,
        "device": manifest["search"].get("device"),
        "run_status": run.get("status") if isinstance(run, dict) else None,
        "study": {"db": facts["db"], "name": facts["name"], "grid_name": grid_name if grid is not None else None},
        "budget": {"effective_trials": budget["effective_trials"], "grid_configs": budget["grid_configs"],
                   "models_produced": budget.get("models_produced")},
        "trials": counts,
        "budget_reached": counted >= budget["effective_trials"],
        "best": best,
        "best_config_agrees": agrees,
        "top5": [{"number": r.trial.number, "value": r.trial.value, "stage": r.stage, "params": r.trial.params,
                  "model": _model_of(r, numbers), "reused_from": r.trial.user_attrs.get("reused_from")}
                 for r in ranked[:TOP_N]],
        "failures": [{"number": r.trial.number, "stage": r.stage, "error": r.trial.user_attrs.get("error")}
                     for r in failed],
        "importances": importances,
        "importances_study": source.study_name if importances else None,
        "notes": notes,
    }


class _Row(NamedTuple):
    """One trial of the run, with the stage it belongs to and the study that holds it."""

    trial: Any  # optuna FrozenTrial
    stage: str  # "grid" | "sampler"
    study: str


def _load_manifest(path: Path) -> dict[str, Any] | str:
    """run_manifest.yaml in; its data out once the keys the report reads check out, or an error line."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match
    from ruamel.yaml import YAML, YAMLError

    if not path.is_file():
        return f"no {path.name} in {path.parent} (is this a qas output dir?)"
    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        return f"cannot read {path}: {_first_line(exc)}"
    error = best_match(Draft202012Validator(_MANIFEST_SCHEMA).iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        return f"{path}: {where + ': ' if where else ''}{error.message}"
    return data


def load_studies(db: Path, name: str, grid_name: str) -> list[tuple[Any, list[Any]]] | str:
    """The study DB and names in; [(study, its trials)] opened read-only out (the grid study second, when
    there is one), or an error line."""
    import optuna
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import DatabaseError

    if not db.is_file():
        return f"no study database {db} (has the search run?)"
    uri = db.resolve().as_uri() + "?mode=ro"  # read-only: a report never creates, migrates or writes the DB
    try:
        storage = optuna.storages.RDBStorage(
            "sqlite://", engine_kwargs={"creator": lambda: sqlite3.connect(uri, uri=True)})
        names = optuna.get_all_study_names(storage)
        if name not in names:
            held = ", ".join(repr(n) for n in names) or "no studies"
            return f"no study {name!r} in {db} (it holds {held})"
        studies = [optuna.load_study(study_name=n, storage=storage) for n in (name, grid_name) if n in names]
        for study in studies:
            if len(study.directions) != 1:
                return f"study {study.study_name!r} in {db} has {len(study.directions)} objectives; qas uses one"
        if len(studies) == 2 and studies[0].direction != studies[1].direction:
            return f"studies {name!r} and {grid_name!r} in {db} optimize in opposite directions"
        return [(study, study.get_trials(deepcopy=False)) for study in studies]
    except DatabaseError as exc:  # not SQLite, or SQLite without Optuna's tables (read-only, so not created)
        return f"{db} is not a readable Optuna study database: {_first_line(getattr(exc, 'orig', None) or exc)}"
    except (StorageInternalError, RuntimeError) as exc:  # RuntimeError: schema from another Optuna version
        return f"cannot read {db}: {_first_line(exc)}"


def _load_json(path: Path) -> dict[str, Any] | str | None:
    """A JSON file in; its object out, None when absent, or a note when unreadable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{path.name} is unreadable ({_first_line(exc)}); ignored"
    return data if isinstance(data, dict) else f"{path.name} is not a JSON object; ignored"


def _model_of(row: _Row, numbers: dict[tuple[str, int], Any]) -> str | None:
    """A trial in; the model file it scored out (a reused score points at the trial that made the model)."""
    model = row.trial.user_attrs.get("model")
    source = numbers.get((row.study, row.trial.user_attrs.get("reused_from")))
    if model is None and source is not None:
        model = source.user_attrs.get("model")
    return model if isinstance(model, str) else None


def _agrees(saved: dict[str, Any], best: _Row, numbers: dict[tuple[str, int], Any], name: str,
            grid_name: str | None) -> bool:
    """best_config.json names the best value, and a trial that scored it (ties count) or none."""
    value = saved.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isclose(value, best.trial.value):
        return False
    number = saved.get("trial_number")
    if number is None:  # AutoSearchPro's grid winner has no trial number
        return True
    study = saved.get("study")
    if not isinstance(study, str):
        study = grid_name if saved.get("stage") == "grid" and grid_name is not None else name
    named = numbers.get((study, number)) if isinstance(number, int) and not isinstance(number, bool) else None
    return named is not None and named.value is not None and math.isclose(named.value, best.trial.value)


def _best(row: _Row, numbers: dict[tuple[str, int], Any], agreed: dict[str, Any] | None,
          saved: dict[str, Any] | None, out_dir: Path) -> dict[str, Any]:
    """The best trial in; its facts out, filled from best_config.json only where that file agrees."""
    config = row.trial.user_attrs.get("config")
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
        "value": row.trial.value,
        "stage": row.stage,
        "reused_from": row.trial.user_attrs.get("reused_from"),
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


def _varying(params: list[dict[str, Any]]) -> list[str]:
    """Param dicts in; the parameters that took more than one value among them (in first-seen order) out."""
    seen: dict[str, set[str]] = {}
    for found in params:
        for key, value in found.items():
            seen.setdefault(key, set()).add(repr(value))  # repr: True and 1 are different choices
    return [key for key, values in seen.items() if len(values) > 1]


def _importances(study: Any, complete: list[Any]) -> tuple[dict[str, float], list[str]]:
    """The study and its complete trials in; (param -> importance, notes) out. Skipped when meaningless.

    Optuna 5's default evaluator (PED-ANOVA) raises on none of the degenerate cases: it warns and returns
    equal shares instead, so the cases are caught here first and the remaining warnings become notes.
    """
    import optuna

    if len(complete) < 2:
        return {}, [f"no importances: they need 2 or more complete trials, found {len(complete)}"]
    if len({t.value for t in complete}) < 2:
        return {}, ["no importances: every complete trial scored the same"]
    varying = _varying([t.params for t in complete])
    if not varying:
        return {}, ["no importances: no parameter took more than one value"]
    notes = []
    constant = len({k for t in complete for k in t.params}) - len(varying)
    if constant:
        notes.append(f"importances leave out {constant} parameter(s) that never changed")
    if len(complete) < ROUGH_BELOW:
        notes.append(f"importances from {len(complete)} complete trials are rough "
                     f"(PED-ANOVA wants {ROUGH_BELOW} or more)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = optuna.importance.get_param_importances(study, params=varying)
    notes += list(dict.fromkeys(f"importances: {w.message}" for w in caught))
    return {key: float(value) for key, value in found.items()}, notes


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---- presentation: one view of the facts, printed by report_text and by templates/report.md.j2 ----

def _view(r: dict[str, Any]) -> dict[str, Any]:
    """The report in; every line and table cell the terminal block and report.md print, as strings, out."""
    from .passes.budget import gb

    t, b, best = r["trials"], r["budget"], r["best"]
    metric = r["metric"] or "value"
    if r["sampler"] == "Grid":
        trials = f"{t['complete_sampler'] + t['complete_grid']} of {b['effective_trials']} grid configs complete"
    else:
        trials = f"{t['complete_sampler']} of {b['effective_trials']} sampler trials complete"
        if b["grid_configs"] or t["complete_grid"]:
            trials += f", {t['complete_grid']} of {b['grid_configs']} grid configs"
    trials += " (budget reached)" if r["budget_reached"] else " (budget NOT reached)"
    others = [f"{t[k]} {k}" for k in ("failed", "interrupted", "running", "pruned") if t[k]]
    trials += f"; {', '.join(others) or 'none failed'}; {t['total']} trials recorded"
    if t["reused"]:
        trials += f"; {t['reused']} reused an earlier score"
    facts = [
        ("search", f"{r['engine']} engine, {r['sampler'] or '?'} sampler on {r['device'] or '?'}, "
                   f"{r['direction']} {metric}" + (f", run {r['run_status']}" if r["run_status"] else "")),
        ("trials", trials),
    ]
    config_json = None
    if best is not None:
        facts.append(("best", f"trial {best['trial_number']} ({best['stage']} stage): {metric} {_num(best['value'])}"
                      + (f", score reused from trial {best['reused_from']}" if best["reused_from"] is not None
                         else "")))
        facts.append(("winner", _file(best["model"], best["model_bytes"], gb)))
        if best["best_model"] is not None:
            facts.append(("best_model", _file(best["best_model"], best["best_model_bytes"], gb)))
        facts.append(("best_config", "agrees with the study" if r["best_config_agrees"]
                      else "does NOT agree with the study (see notes)"))
        if best["config"] is not None:
            config_json = json.dumps(best["config"], indent=2, ensure_ascii=False)
    else:
        facts.append(("best", "none: no trial has completed"))
    shown = _varying([e["params"] for e in r["top5"]])
    top = [[str(i), str(e["number"]), e["stage"], _num(e["value"]), e["model"] or "-"]
           + ([", ".join(f"{k}={_num(e['params'][k])}" for k in shown if k in e["params"]) or "-"] if shown else [])
           for i, e in enumerate(r["top5"], 1)]
    return {
        "title": f"{r['name']} ({r['out_dir']})",
        "facts": facts,
        "config_json": config_json,
        "metric": metric,
        "top_header": ["rank", "trial", "stage", metric, "model"] + (["differing params"] if shown else []),
        "top": top,
        "importances": [(k, f"{v:.3f}") for k, v in r["importances"].items()],
        "failures": [(f"{f['stage']} trial {f['number']}", _first_line(f["error"]) if f["error"]
                      else "(no error recorded)") for f in r["failures"]],
        "notes": list(r["notes"]),
    }


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else json.dumps(value)


def _file(name: str | None, size: int | None, gb: Any) -> str:
    if name is None:
        return "unknown (the trial recorded no model)"
    return f"{name}, {gb(size)}" if size is not None else f"{name} (missing: deleted or never written)"


def report_text(report: dict[str, Any]) -> str:
    """The report in; a short block for a terminal out."""
    v = _view(report)
    width = max(len(k) for k, _ in v["facts"])
    lines = [f"report for {v['title']}:"] + [f"  {k:<{width}}  {text}" for k, text in v["facts"]]
    if v["failures"]:
        lines += ["failures:"] + [f"  {n}: {error}" for n, error in v["failures"]]
    if v["config_json"] is not None:
        lines += ["best config:"] + ["  " + line for line in v["config_json"].splitlines()]
    if v["top"]:
        rows = [v["top_header"], *v["top"]]
        widths = [max(len(row[i]) for row in rows) for i in range(len(v["top_header"]))]
        lines.append(f"top {len(v['top'])}:")
        lines += ["  " + "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)).rstrip() for row in rows]
    if v["importances"]:
        width = max(len(k) for k, _ in v["importances"])
        lines += ["importances:"] + [f"  {k:<{width}}  {share}" for k, share in v["importances"]]
    if v["notes"]:
        lines += ["notes:"] + [f"  {note}" for note in v["notes"]]
    return "\n".join(lines) + "\n"


# ---- files ----

def write_report_files(report: dict[str, Any], out_dir: Path) -> list[str] | str:
    """The report and its output dir in; plots under report/ and report.md written, their relative paths out.

    A one-line error comes back instead when nothing could be written; then nothing was replaced.
    """
    files: dict[str, bytes] = {}
    notes: list[str] = []
    facts = report["study"]
    complete = report["trials"]["complete_sampler"] + report["trials"]["complete_grid"]
    loaded = load_studies(out_dir / facts["db"], facts["name"], facts["grid_name"] or "") if complete else None
    if loaded is None:
        notes.append("no plots: no trial has completed")
    elif isinstance(loaded, str):
        notes.append(f"no plots: {loaded}")
    else:
        studies = [study for study, trials in loaded if any(t.state.name == "COMPLETE" for t in trials)]
        ranked_by = next((s for s in studies if s.study_name == report["importances_study"]), None)
        files.update(_plots(studies, ranked_by, list(report["importances"]), report["metric"] or "Objective Value"))
        if ranked_by is None:
            notes.append("no importance plot: there are no importances (see the notes)")
    view = _view(report)
    links = {key: name if name in files else None for key, name in PLOTS.items()}
    text = _environment().get_template("report.md.j2").render(
        v=view, links=links, file_notes=notes, fence=_fence(view["config_json"]))
    files["report.md"] = text.encode("utf-8")
    return _write_all(files, out_dir)


def _plots(studies: list[Any], importance_study: Any | None, importance_params: list[str],
           target_name: str) -> dict[str, bytes]:
    """The studies in; {relative path: bytes} of the history (HTML and PNG, one series a study) and importance
    (HTML) plots out."""
    import io

    import matplotlib

    matplotlib.use("Agg")  # before pyplot; no display, and kaleido is not needed for the PNG
    import matplotlib.pyplot as plt
    import optuna

    plotted = studies[0] if len(studies) == 1 else studies
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExperimentalWarning for the matplotlib plot; importance notes already made
        history = optuna.visualization.plot_optimization_history(plotted, target_name=target_name)
        found[PLOTS["history_html"]] = _html(history)
        if importance_study is not None:
            shares = optuna.visualization.plot_param_importances(importance_study, params=importance_params)
            found[PLOTS["importances_html"]] = _html(shares)
        axes = optuna.visualization.matplotlib.plot_optimization_history(plotted, target_name=target_name)
    buffer = io.BytesIO()
    try:
        axes.figure.set_size_inches(10, 5)  # room for the legend optuna puts beside the axes
        axes.figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    finally:
        plt.close(axes.figure)
    found[PLOTS["history_png"]] = buffer.getvalue()
    return found


def _html(figure: Any) -> bytes:
    # plotly.js inlined (about 5 MB a file) so the page works offline
    return figure.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def _fence(text: str | None) -> str:
    """Text in; a markdown code fence longer than any run of backticks inside it out."""
    longest, run = 0, 0
    for char in text or "":
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _md(text: Any) -> str:
    """Free text in; markdown-inert text for a paragraph or a table cell out."""
    out = " ".join(str(text).split())
    for char in "\\`*_[]<>|#":
        out = out.replace(char, "\\" + char)
    return out


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["md"] = _md
    return env


def _write_all(files: dict[str, bytes], out_dir: Path) -> list[str] | str:
    """{relative path: bytes} in; each written via a temporary sibling and os.replace, the paths out, or an error."""
    staged: list[tuple[Path, Path]] = []
    try:
        for name, data in files.items():
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            staged.append((Path(temp), target))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        for temp, target in staged:
            os.replace(temp, target)
    except OSError as exc:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        return f"cannot write the report into {out_dir}: {exc.strerror or exc}"
    return list(files)
