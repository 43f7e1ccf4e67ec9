"""keep_float.search strategy accuracy_control in the report: the sampler study's complete trials and its stop record
in; each step (phase, what it kept float, its score, within tolerance or not) and the answer out, JSON-ready and as
report lines."""

from __future__ import annotations

from typing import Any

from compiler.runtime.accuracy_control import STEP_ATTR
from compiler.runtime.contract import ATTR_CONFIG, ATTR_KEEP_FLOAT, ATTR_REUSED_FROM, ATTR_WITHIN_TOLERANCE
from compiler.runtime.sensitivity import choice_text

PHASE_WORDS = {"quantized": "fully quantized", "prefix": "bisection", "drop": "drop one group"}


def accuracy_steps(trials: list[Any], stopped: dict[str, Any] | None) -> dict[str, Any] | None:
    """The steps in trial order (a repeat answered from the study is the same step, listed once) and the proven
    answer (the stop record's); None when no trial is a step."""
    steps = []
    for trial in sorted(trials, key=lambda t: t.number):
        step = trial.user_attrs.get(STEP_ATTR)
        if step is None or ATTR_REUSED_FROM in trial.user_attrs:
            continue
        keeps = trial.user_attrs.get(ATTR_KEEP_FLOAT) or {}
        steps.append({"trial": trial.number, "phase": step.get("phase"),
                      "choice": choice_text((trial.user_attrs.get(ATTR_CONFIG) or {}).get("keep_float")),
                      "accuracy": trial.values[0] if trial.values else None,
                      "within_tolerance": trial.user_attrs.get(ATTR_WITHIN_TOLERANCE),
                      "groups": keeps.get("groups") or [], "nodes": len(keeps.get("nodes") or [])})
    if not steps:
        return None
    proven = stopped is not None and stopped.get("reason") == "accuracy_control"
    return {"steps": steps, "proven": proven, "answer": stopped.get("answer") if proven else None,
            "detail": stopped.get("detail") if proven else None}


def accuracy_lines(record: dict[str, Any] | None, number: Any) -> list[tuple[str, str]]:
    """The report's lines: one a step, then the answer (or that the cap came first); `number` formats a score."""
    if record is None:
        return []
    out = []
    for k, step in enumerate(record["steps"], 1):
        verdict = {True: "within tolerance", False: "outside tolerance"}.get(step["within_tolerance"], "?")
        out.append((f"step {k}", f"trial {step['trial']}, {PHASE_WORDS.get(step['phase'], step['phase'])}: "
                                 f"{step['choice']} ({step['nodes']} node(s) float): {number(step['accuracy'])}, "
                                 f"{verdict}"))
    if record["proven"] and record["answer"] is not None:
        kept = [s for s in record["steps"] if s["within_tolerance"]]
        best = min(kept, key=lambda s: (s["nodes"], s["trial"])) if kept else None
        out.append(("answer", f"proven in {len(record['steps'])} step(s): trial {best['trial']} keeps "
                              f"{', '.join(best['groups']) or 'nothing'} ({best['nodes']} node(s)) float"
                    if best else record["detail"]))
    elif record["proven"]:
        out.append(("answer", f"none: {record['detail']}"))
    else:
        out.append(("answer", f"not proven yet: {len(record['steps'])} step(s) so far (a re-run goes on; n_trials "
                              "may have capped it)"))
    return out
