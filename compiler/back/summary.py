"""The plan printout of `qas validate` / `qas compile`: a Plan in, a summary dict (for --format json) or text out."""

from __future__ import annotations

from typing import Any

from compiler.back.cost import duration
from compiler.back.lower import Plan
from compiler.check.budget_facts import gb
from compiler.runtime.objectives import PRIMARY

ROUGH = ("rough: fitted to CPU runs of three models, fine-tuning included (bench/cost_model.py; ratios in README), "
         "within 2x of them; fitted on a loaded 2-core machine, where fine-tuning ran 20-35x slower than on an idle "
         "one; another model shape or a GPU can put it several times off; constants in "
         "compiler/data/cost_model.json")


def plan_summary(plan: Plan) -> dict[str, Any]:
    """Everything a reviewer asks before starting a long search, as plain JSON data."""
    b, t, s = plan.budget, plan.time_estimate, plan.settings
    evaluator = s.evaluator or {}
    return {
        "name": plan.name,
        "engine": s.engine,
        "space": {"preset": plan.preset, "sha256": s.space_hash},
        "sampler": s.sampler,
        "seed": s.seed,
        "two_stage": s.two_stage,
        "trials": {"requested": b.requested_trials, "effective": b.effective_trials,
                   "quark_would_run": b.quark_would_run, "grid_configs": b.grid_configs,
                   "models_produced": b.models_produced},
        "device": s.device,
        "metric": s.metric or f"{evaluator.get('file')}:{evaluator.get('function')}",
        "higher_is_better": plan.higher_is_better if s.metric is None or s.labels is not None else None,
        "direction": s.direction,
        "objective": _objective(plan),
        "outputs": {"dir": plan.output_dir, "script": plan.script, "study_db": s.study_db},
        "workers": s.workers,
        "storage": {"kind": s.storage_kind, "file": s.study_db, "url_env": s.storage.get("env"),
                    "artifacts": s.storage.get("artifacts"), "heartbeat_s": s.storage.get("heartbeat"),
                    "grace_period_s": s.storage.get("grace")},
        "launch": {target: {"file": launch["file"], "workers": launch["workers"]}
                   for target, launch in plan.launch.items()},
        "disk": {"estimate_bytes": b.disk_estimate_bytes, "models_bytes": b.disk_estimate_bytes - b.dump_bytes,
                 "output_dump_bytes": b.dump_bytes, "lower_bound": b.dump_is_lower_bound},
        "time": {"startup_s": round(t.startup_s, 1),
                 "per_trial_s": {k: round(v, 3) for k, v in t.per_trial_s.items()},
                 "finetune_iterations": t.iterations,
                 "total_s": [round(v, 1) for v in t.total_s],
                 "sensitivity_s": round(t.sensitivity_s, 1),
                 "parallelism": round(t.parallelism, 2),
                 "new_trials": [round(v, 1) for v in t.new_trials],
                 "samples_assumed": t.samples_assumed,
                 "rough": ROUGH},
        "environment": plan.environment,
        "sensitivity": _sensitivity(s.sensitivity),
        **_objectives(plan),
    }


ENGINE_TEXT = {"qas": "qas (qas's own trial loop over Quark's quantizer)",
               "autosearchpro": "autosearchpro (Quark's AutoSearchPro loop)"}


def _sensitivity(given: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sensitivity stage as the plan shows it: method, samples, blocks and the searched prefix."""
    if given is None:
        return None
    return {"method": given["method"], "samples": given["samples"], "aggregate": given["aggregate"],
            "blocks": len(given["blocks"]), "search": given["search"]}


def _objectives(plan: Plan) -> dict[str, Any]:
    """objectives, tolerance and stop, when the spec declares them (a plan without them keeps its keys)."""
    out: dict[str, Any] = {}
    s = plan.settings
    if s.objectives != ["accuracy"] or s.tolerance is not None:
        out["objectives"] = s.objectives
        out["tolerance"] = s.tolerance
    if s.stop is not None:
        out["stop"] = s.stop
    return out


WINNER_TEXT = {"latency": "the fastest within it (latencies tie within their measured spread), else the most accurate",
               "size": "the smallest within it, else the most accurate",
               "quantized_fraction": "the most quantized within it, else the most accurate",
               "accuracy": "the most accurate (and whether it is within)"}


def _objectives_text(s: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    if "objectives" in s:
        tolerance = s["tolerance"]
        told = ("no tolerance: the most accurate wins" if tolerance is None else
                f"tolerance {tolerance['value']:.6g}" + (" of the float score" if tolerance["relative"] else "")
                + "; winner: "
                + WINNER_TEXT[next((o for o in PRIMARY if o in s["objectives"]), "accuracy")])
        rows.append(("objectives", f"{', '.join(s['objectives'])}; {told}"))
    if "stop" in s:
        stop, parts = s["stop"], []
        if stop["at_tolerance"]:
            parts.append(f"at tolerance (after {stop['min_trials']} trials, none of the last {stop['patience']} "
                         f"improving by {stop['margin']:g})")
        if stop["timeout"] is not None:
            parts.append(f"after {duration(stop['timeout'])} from the first trial")
        rows.append(("stop", "; ".join(parts) or "none"))
    return rows


def summary_text(s: dict[str, Any]) -> str:
    """The same summary as a short aligned block for a terminal."""
    trials, disk, time = s["trials"], s["disk"], s["time"]
    space = s["space"]["preset"] or f"custom space {s['space']['sha256'][:12]}"
    env = s["environment"]
    found = ", ".join(f"{k} {v or 'MISSING'}" for k, v in env["packages"].items())
    classes = ", ".join(
        f"{name} {duration(sec)}" + (f" ({time['finetune_iterations'][name]} iterations)" if name != "plain" else "")
        for name, sec in time["per_trial_s"].items())
    low, high = time["total_s"]
    total = duration(low) if round(low) == round(high) else f"{duration(low)} to {duration(high)}"
    rows = [
        ("engine", ENGINE_TEXT.get(s["engine"], s["engine"])),
        ("space", f"{space}, sampler {s['sampler']} (seed {s['seed']})" + (", two-stage" if s["two_stage"] else "")),
        ("trials", f"{trials['effective']} of {trials['requested']} requested"
                   + (f" (Quark alone would run {trials['quark_would_run']})"
                      if trials["quark_would_run"] != trials["requested"] else "")
                   + (f", after {trials['grid_configs']} grid configs" if trials["grid_configs"] else "")
                   + f" = {trials['models_produced']} models"),
        ("device", s["device"]),
        ("metric", f"{s['metric']} ({s['direction']})" if s["higher_is_better"] is None else
                   f"{s['metric']}, {'higher' if s['higher_is_better'] else 'lower'} is better; "
                   f"the search {s['direction']}s {s['objective']}"),
        ("outputs", f"{s['outputs']['dir']}/ ({s['outputs']['script']}"
                    + (f", {s['outputs']['study_db']})" if s["storage"]["kind"] != "url" else ")")),
        ("workers", f"{s['workers']} process{'es' if s['workers'] > 1 else ''} on this machine"
                    + (" (--workers N overrides)" if s["storage"]["kind"] != "sqlite" else "")),
        ("storage", _storage_text(s["storage"])),
        *([("launch", ", ".join(f"{launch['file']} ({launch['workers']} {LAUNCH_UNITS[target]})"
                                for target, launch in s["launch"].items()))] if s["launch"] else []),
        *([("keep float", _sensitivity_text(s["sensitivity"]))] if s["sensitivity"] else []),
        ("disk", ("at least " if disk["lower_bound"] else "") + f"{gb(disk['estimate_bytes'])} "
                 f"({gb(disk['models_bytes'])} models, {gb(disk['output_dump_bytes'])} output dumps)"),
        ("time/trial", classes + (" (sample count assumed)" if time["samples_assumed"] else "")),
        ("time", _time_text(s, total)),
        *_objectives_text(s),
        ("checked on", f"{env['source']}: Python {env['python']}, {env['accelerator']}; {found}"),
    ]
    width = max(len(k) for k, _ in rows)
    return f"plan for {s['name']}:\n" + "".join(f"  {k:<{width}}  {v}\n" for k, v in rows)


def _time_text(s: dict[str, Any], total: str) -> str:
    """The total, what it includes, and what divides it (workers) or shrinks it (repeats answered from the study)."""
    time, trials = s["time"], s["trials"]
    parts = [f"{duration(time['startup_s'])} start-up"]
    if time["sensitivity_s"]:
        parts.append(f"{duration(time['sensitivity_s'])} sensitivity ranking")
    notes = []
    if s["workers"] > 1:
        notes.append(f"{s['workers']} workers here run about {time['parallelism']:.1f} trials at once")
    if s["launch"]:
        notes.append("launch files not counted: their workers run on other machines")
    new = time["new_trials"][0]
    if ((s["sensitivity"] or {}).get("search") or {}).get("strategy") == "accuracy_control":
        notes.append(f"accuracy_control stops once its answer is proven: {new:.0f} to {trials['effective']} steps")
    elif trials["effective"] and new < trials["effective"] - 0.5:
        notes.append(f"about {new:.0f} of the {trials['effective']} sampler trials are new, the rest repeats "
                     "answered from the study")
    return (f"{total}, {' and '.join(parts)} included" + "".join(f"; {n}" for n in notes)
            + " (rough: can be several times off)")


LAUNCH_UNITS = {"kubernetes": "pods", "slurm": "array tasks"}


def _storage_text(storage: dict[str, Any]) -> str:
    """Where the study lives, in words; a database by the variable that will hold its URL, never a value."""
    if storage["kind"] == "journal":
        return f"{storage['file']} (journal file: workers on this machine)"
    if storage["kind"] == "sqlite":
        return f"{storage['file']} (SQLite: one process)"
    artifacts = storage["artifacts"] or "each worker's output folder"
    return (f"PostgreSQL from ${storage['url_env']}, artifacts {artifacts} "
            f"(heartbeat {duration(storage['heartbeat_s'])}, "
            f"grace {duration(storage['grace_period_s'])})")


def _objective(plan: Plan) -> str:
    """What the search's trial values are, in words: a built-in metric against the float model's outputs, or the
    difference from the float model's score that a user evaluator is wired into (F6)."""
    s = plan.settings
    if s.labels is not None:  # top1/top5
        return f"its drop from the float model's {s.metric} accuracy against the labels (float minus quantized)"
    if s.metric is not None:
        return f"{s.metric} of each quantized model's outputs against the float model's"
    if plan.higher_is_better:
        return "its drop from the float model's score (float minus quantized)"
    return "its rise over the float model's score (quantized minus float)"


def _sensitivity_text(s: dict[str, Any]) -> str:
    search = s["search"]
    searched = ("not searched (qas sensitivity ranks only)" if search is None else
                f"searched: top_k in {search['top_k']}" if "top_k" in search else
                f"searched: coverage {search['coverage']['low']:g} to {search['coverage']['high']:g} of the total"
                if "coverage" in search else
                "searched: granular, one yes/no a group (first: none, all, top 1, 2, 4)"
                if search.get("strategy") == "granular" else
                "accuracy_control: the quantized model, then a bisection over the ranking's prefixes for the shortest "
                "within tolerance, then each kept group dropped once; it stops once the answer is proven"
                if search.get("strategy") == "accuracy_control" else
                f"searched: {search.get('sections', 2)} partitioned section(s) of the graph's order kept float")
    return (f"sensitivity ranking ({s['method']} on up to {s['samples']} samples, {s['blocks']} blocks by "
            f"{s['aggregate']}, one quantization before the search); {searched}")
