"""The report's terminal view: the report (JSON-ready data) in; every line and table cell as strings out, for
the terminal block (report_text) and for report.md (templates/report.md.j2).
"""

from __future__ import annotations

import json
from typing import Any

from compiler.report.accuracy_steps import accuracy_lines
from compiler.report.manifest import first_line
from compiler.report.studies import varying
from compiler.runtime.contract import OBJECTIVE_UNITS
from compiler.runtime.sensitivity import MEASURES, choice_text


def view(r: dict[str, Any]) -> dict[str, Any]:
    """The report in; every line and table cell the terminal block and report.md print, as strings, out."""
    metric = r["metric"] or "value"
    higher, float_score = r.get("higher_is_better"), r.get("float_score")
    value = metric if higher is None else f"{metric} {'drop' if higher else 'rise'}"  # what a trial's value is
    scored = float_score is not None and any(e.get("score") is not None for e in r["top5"])
    facts = [
        ("search", f"{r['engine']} engine, {r['sampler'] or '?'} sampler on {r['device'] or '?'}, "
                   f"{r['direction']} {_objective(metric, higher)}"
                   + (f", run {r['run_status']}" if r["run_status"] else "")),
        ("trials", _trials_line(r)),
    ]
    if len(r.get("workers", {})) > 1:
        facts.append(("workers", "; ".join(f"{w}: {c['complete']} complete" + "".join(
            f", {c[k]} {k}" for k in ("pruned", "failed", "interrupted", "running") if c.get(k))
            for w, c in r["workers"].items())))
    if r["metric"] is not None:
        facts.append(("float model", _float_model(metric, higher, float_score)))
    facts += _sensitivity_facts(r.get("sensitivity"))
    facts += accuracy_lines(r.get("accuracy_control"), _num)
    best_facts, config_json = _best_facts(r, metric, value)
    facts += best_facts
    if r.get("durations"):
        facts.append(("trial time", _durations(r["durations"])))
    if r.get("cost"):
        facts += _cost_facts(r["cost"])
    stopped = r.get("stopped")
    if stopped:
        facts.append(("stopped", f"{stopped['reason']}: {stopped.get('detail', '')} (at {stopped.get('at', '?')})"))
    facts += _objective_facts(r.get("objectives"))
    settings, shown = _differing(r["top5"])
    top = [[str(i), _trial_cell(e), e["stage"], _num(e["value"])]
           + ([_num(e["score"]) if e.get("score") is not None else "-"] if scored else [])
           + [_seconds(e.get("duration_s")), _model_cell(e)]
           + ([", ".join(f"{k}={_num(row[k])}" for k in shown if k in row) or "-"] if shown else [])
           for i, (e, row) in enumerate(zip(r["top5"], settings, strict=True), 1)]
    return {
        "title": f"{r['name']} ({r.get('out_dir_shown') or r['out_dir']})",
        "facts": facts,
        "config_json": config_json,
        "metric": metric,
        "value": value,  # what a trial's value is: the metric, or its drop from (rise over) the float score
        "top_header": ["rank", "trial", "stage", value] + ([metric] if scored else []) + ["time", "model"]
                      + (["differing params"] if shown else []),
        "top": top,
        "importances": [(k, f"{v:.3f}") for k, v in r["importances"].items()],
        "failures": [(f"{f['stage']} trial {f['number']}", first_line(f["error"]) if f["error"]
                      else "(no error recorded)") for f in r["failures"]],
        "notes": list(r["notes"]),
    }


def _trials_line(r: dict[str, Any]) -> str:
    """The trials line: complete against the budget by stage, why the search ended, failures and queued slots."""
    t, b = r["trials"], r["budget"]
    if r["sampler"] == "Grid":
        trials = f"{t['complete_sampler'] + t['complete_grid']} of {b['effective_trials']} grid configs complete"
    else:
        trials = f"{t['complete_sampler']} of {b['effective_trials']} sampler trials complete"
        if t.get("pruned"):  # search.prune: pruned trials count toward the budget
            trials = (f"{t['complete_sampler'] + t['pruned']} of {b['effective_trials']} sampler trials done "
                      f"({t['complete_sampler']} complete, {t['pruned']} pruned)")
        if r.get("grid_outside_study") and b["grid_configs"]:
            trials += f", the {b['grid_configs']}-config grid stage run by Quark outside the study"
        elif b["grid_configs"] or t["complete_grid"]:
            trials += f", {t['complete_grid']} of {b['grid_configs']} grid configs"
    stopped = r.get("stopped")
    trials += (f" (stopped: {stopped['reason']})" if stopped else " (budget reached)" if r["budget_reached"]
               else " (budget NOT reached)")
    others = [f"{t[k]} {k}" for k in ("failed", "interrupted", "retried", "running") if t.get(k)]
    trials += f"; {', '.join(others) or 'none failed'}; {t['total']} trials run"  # queued slots are not trials
    if t.get("waiting"):
        trials += f", {t['waiting']} slot(s) queued, not yet run"
    if t["reused"]:
        trials += f"; {t['reused']} reused an earlier score"
    return trials


def _best_facts(r: dict[str, Any], metric: str, value: str) -> tuple[list[tuple[str, str]], str | None]:
    """The best trial's lines (its value against the float model's score, its files, best_config.json's state) and
    its configuration as JSON (None without one)."""
    from compiler.check.budget_facts import gb

    best, higher, float_score = r["best"], r.get("higher_is_better"), r.get("float_score")
    if best is None:
        return [("best", "none: no trial has completed")], None
    score = best.get("score")
    against = (f" ({metric} {_num(score)}; the float model's {_num(float_score)})" if score is not None
               else " from the float model's score" if higher is not None else "")
    facts = [("best", f"trial {best['trial_number']} ({best['stage']} stage): {value} {_num(best['value'])}" + against
              + (f", score reused from trial {best['reused_from']}" if best["reused_from"] is not None else "")),
             ("winner", _file(best["model"], best["model_bytes"], gb)
              + _beside_float(best["model_bytes"], r.get("float_model_bytes"), gb))]
    if best["best_model"] is not None:
        facts.append(("best_model", _file(best["best_model"], best["best_model_bytes"], gb)))
    facts.append(("best_config", BEST_CONFIG_STATES[r.get("best_config") or
                                                    ("agrees" if r["best_config_agrees"] else "disagrees")]))
    config_json = json.dumps(best["config"], indent=2, ensure_ascii=False) if best["config"] is not None else None
    return facts, config_json


BEST_CONFIG_STATES = {  # report["best_config"] in words
    "agrees": "agrees with the study",
    "disagrees": "does NOT agree with the study (see notes)",
    "absent": "not written yet (the search writes it when it ends; re-run to resume an interrupted one)",
    "unreadable": "unreadable (see notes)",
}
MAXIMIZED = {"cos", "psnr", "ssim"}  # Quark's built-in metrics that grow as the outputs get closer


def _objective(metric: str, higher: bool | None) -> str:
    """What the search ranked by, in words: `L2`, or `top1 drop from the float model's score (higher top1 is
    better)` for a user evaluator, whose trial values are differences from the float model's score."""
    if higher is None:
        return metric
    return (f"{metric} {'drop' if higher else 'rise'} from the float model's score "
            f"({'higher' if higher else 'lower'} {metric} is better)")


def _float_model(metric: str, higher: bool | None, float_score: float | None) -> str:
    """The float model's line: its score under a user evaluator, or what it is to a built-in metric."""
    if higher is not None:
        if float_score is None:
            return f"{metric} not recorded by this run, so only the differences from it are known"
        return f"{metric} {_num(float_score)} (trial values are the {'drop from' if higher else 'rise over'} it)"
    if metric in MAXIMIZED:
        return f"the reference: each value is the {metric} of a quantized model's outputs against the float model's"
    return f"{metric} 0 against itself (each value is a quantized model's {metric} distance from its outputs)"


def _differing(top: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The top rows in; each row's settings by name, and the names whose value differs between rows, out.

    The settings are the nested config each trial recorded, flattened to dotted names, when every row has one
    (grid-stage trials have no Optuna params: their configurations are not sampled); else Optuna's params. In a
    config, a top-level name some rows lack counts as a value of its own (grid rows have no `algorithms`); a
    nested one does not (a row without adaquant_params has none of its leaves, which says nothing new).
    """
    if not top or any(not isinstance(e.get("config"), dict) for e in top):
        params = [e["params"] for e in top]
        return params, varying(params)
    rows = [_flat(e["config"]) for e in top]
    shown = []
    for name in dict.fromkeys(k for row in rows for k in row):
        values = {repr(row[name]) for row in rows if name in row}  # repr: True and 1 are different choices
        if len(values) > 1 or ("." not in name and any(name not in row for row in rows)):
            shown.append(name)
    return rows, shown


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config in; its leaves by dotted name (adaquant_params.num_iterations) out."""
    found: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            found.update(_flat(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else json.dumps(value)


def _seconds(value: Any) -> str:
    """A duration in seconds as a table cell: `12.3 s`, `2.1 min`, or `-` when unknown."""
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.3g} s"


def _durations(d: dict[str, Any]) -> str:
    """The complete trials' wall times in a line: median, range, total."""
    return (f"median {_seconds(d['median_s'])} a trial ({_seconds(d['min_s'])} to {_seconds(d['max_s'])}), "
            f"{_seconds(d['total_s'])} over {d['count']} complete trial{'s' if d['count'] != 1 else ''}")


def _cost_facts(cost: dict[str, Any]) -> list[tuple[str, str]]:
    """The cost section in; a line for the median trial's steps (and its ratio to the floor) and one for the counts."""
    steps = ", ".join(f"{name.removesuffix('_s')} {_seconds(value)}" for name, value in cost["steps"].items() if value)
    floor = cost["floor_s"]
    ratio = f"; {cost['trial_median_s'] / floor:.1f}x the floor of {_seconds(floor)}" if floor else ""
    derived = cost.get("calibrations_derived")
    counts = (f"{cost['quantizations']} quantized, {cost['calibrations']} calibrated"
              + (f" ({derived} more from a kept histogram collection)" if derived else "")
              + (f", {cost['inferences']} evaluation inferences" if cost["inferences"] is not None else "")
              + (f", {cost['pruned']} pruned ({cost['inferences_saved']} evaluation inferences saved)"
                 if cost["pruned"] else ""))
    return [("trial cost", f"median {_seconds(cost['trial_median_s'])} ({steps or 'no step timed'}){ratio}"),
            ("work", counts)]


def _beside_float(size: int | None, float_size: int | None, gb: Any) -> str:
    """`; float model 21.7 KB (the winner is 56% of it)` when both sizes are known, else nothing."""
    if float_size is None:
        return ""
    share = f" (the winner is {size / float_size:.0%} of it)" if size is not None and float_size else ""
    return f"; float model {gb(float_size)}{share}"


def _file(name: str | None, size: int | None, gb: Any) -> str:
    if name is None:
        return "unknown (the trial recorded no model)"
    return f"{name}, {gb(size)}" if size is not None else f"{name} (missing: deleted or never written)"


def report_text(report: dict[str, Any]) -> str:
    """The report in; a short block for a terminal out."""
    v = view(report)
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
        lines += ["  " + "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip()
                  for row in rows]
    if v["importances"]:
        width = max(len(k) for k, _ in v["importances"])
        lines += ["importances:"] + [f"  {k:<{width}}  {share}" for k, share in v["importances"]]
    if v["notes"]:
        lines += ["notes:"] + [f"  {note}" for note in v["notes"]]
    return "\n".join(lines) + "\n"


def _model_cell(entry: dict[str, Any]) -> str:
    """A top-5 row's model: its file name, marked when keep_models (or a hand) removed it."""
    if not entry["model"]:
        return "-"
    return entry["model"] if entry.get("model_exists", True) else f"{entry['model']} (deleted)"


def _objective_facts(o: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The winner rule's lines: why the winner won, float model against winner, speed-up, loss, tolerance, front."""
    if o is None:
        return []
    out = [("recommended", o["why"] or "?")]
    f, w = o["float"], o["winner"]
    lat = o.get("winner_latency") or f.get("latency") or {}
    how = [lat.get("provider", "?"), f"{lat.get('threads', '?')} thread(s)"]
    if lat.get("rounds") and lat.get("method"):
        how.append(f"{lat['rounds']} rounds {lat['method']}")
    label = f" ({', '.join(how)})" if lat else ""
    if "latency" in w:
        line = (f"winner {_ms(w['latency'], o.get('winner_latency'))}, "
                f"float model {_ms(f['latency_ms'], f.get('latency'))}")
        if o["speedup"] and o.get("verdict") == "slower":
            line += f": the quantized model is {1 / o['speedup']:.2f}x SLOWER than the float model"
        elif o["speedup"]:
            line += f": {o['speedup']:.2f}x speed-up" + (", not measurably faster than the float model"
                                                         if o.get("verdict") == "not faster" else "")
        out.append(("latency", line + label))
    if "size" in w:
        out.append(("size", f"winner {int(w['size'])} B, float model {f['size_bytes']} B"
                            + (f" ({o['size_ratio']:.0%})" if o["size_ratio"] else "")))
    if "quantized_fraction" in w:
        out.append(("quantized", f"winner {w['quantized_fraction']:.0%} of the weight nodes (the rest kept float)"))
    tolerance = o.get("tolerance")
    if tolerance is not None:
        met = "met" if tolerance.get("met") else "NOT met: no trial is within it"
        out.append(("tolerance", f"{_num(tolerance['value'])}"
                                 + (" of the float score" if tolerance["relative"] else "")
                                 + f" (bound {_num(tolerance.get('bound'))}; loss {_num(o['loss'])}): {met}"))
    if o.get("runner_up"):
        ru = o["runner_up"]
        out.append(("runner-up", f"trial {ru['trial_number']}{_repeats(ru)}: "
                    + _values(ru["values"])))
    if o.get("pareto"):
        out.append(("pareto front", "; ".join(
            f"trial {p['trial_number']}{_repeats(p)}: " + _values(p["values"])
            + (" (within)" if p.get("within_tolerance") else "") for p in o["pareto"])))
    return out


UNITS = OBJECTIVE_UNITS  # as the script's trial lines print them


def _values(values: dict[str, Any]) -> str:
    """A trial's objective values with their units: accuracy 0.03, latency 0.13 ms, size 32757 B."""
    return ", ".join(f"{k} {_num(v)}{UNITS.get(k, '')}" for k, v in values.items())


def _ms(value: Any, record: dict[str, Any] | None) -> str:
    """A latency in ms, with its measured spread when the record has one."""
    spread = (record or {}).get("spread_ms")
    return f"{_num(value)} ± {spread:.2g} ms" if isinstance(spread, (int, float)) else f"{_num(value)} ms"


def _repeats(entry: dict[str, Any]) -> str:
    """` (repeated by trials 9, 12)` when other trials were answered from the study with this configuration."""
    numbers = entry.get("repeated_by") or []
    return f" (repeated by trial{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))})" if numbers else ""


def _trial_cell(entry: dict[str, Any]) -> str:
    """A top-5 row's trial number, with the trials that repeated its configuration."""
    numbers = entry.get("repeated_by") or []
    return f"{entry['number']} (+{', '.join(map(str, numbers))} reused)" if numbers else str(entry["number"])


def _sensitivity_facts(sens: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The sensitivity ranking's lines: its top groups and cost, and what the winner keeps in float."""
    if sens is None:
        return []
    cost = sens.get("cost") or {}
    top = ", ".join(f"{g['name']} {_num(g['score'])}" + ("" if g.get("above_noise", True) else " (within noise)")
                    for g in sens["top"])
    measure = MEASURES.get(sens["method"], str(sens["method"]))
    out = [("sensitivity", f"{measure} on {sens['samples']} samples, base error {_num(sens['baseline_error'])}; "
                           f"most sensitive: {top}; cost {cost.get('quantizations', '?')} quantization "
                           f"({_num(cost.get('quantize_s'))} s) + {cost.get('inferences', '?')} inferences "
                           f"({_num(cost.get('infer_s'))} s)"
                           + (f"; charts {', '.join(sens['charts'])}" if sens["charts"] else ""))]
    out += [("sensitivity note", note) for note in sens.get("notes") or []]
    keeps = sens.get("winner_keeps")
    if keeps:
        out.append(("kept float", f"{', '.join(keeps.get('groups') or []) or 'nothing'} "
                                  f"(choice {choice_text(keeps.get('choice'))})"))
    return out
