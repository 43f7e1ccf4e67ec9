"""Where a search's time went: the trials (their recorded steps) and the study's floor record in; the report's `cost`
section out: {floor_s, trial_median_s, calibrations, calibrations_derived, quantizations, inferences, inferences_saved,
pruned, steps}. calibrations are passes over the calibration samples; calibrations_derived the ranges computed from a
kept histogram collection instead (histogram_cache.py); a restored trial is neither.

floor_s is F = one float pass over the calibration samples + one quantized pass over the evaluation samples (the
median evaluate_s of the trials scored whole; prune_s, the pruner's bookkeeping, apart): what a trial must cost at
least. `steps` is the median of each step over the quantized
trials. A trial answered from the study (a repeated configuration) quantized nothing and is not counted.
"""

from __future__ import annotations

import statistics
from typing import Any

from compiler.runtime.contract import ATTR_REUSED_FROM, ATTR_SAMPLES_SEEN, ATTR_STEPS, FLOOR_ATTR

STEPS = ("calibrate_s", "quantize_s", "finetune_s", "evaluate_s", "latency_s", "prune_s")


def cost_section(trials: list[Any], study_attrs: dict[str, Any]) -> dict[str, Any] | None:
    """The complete and pruned trials of both stages and the sampler study's attributes in; the cost section out
    (None when no trial recorded its steps: an engine autosearchpro search, or a study from before steps)."""
    quantized = [t for t in trials if ATTR_STEPS in t.user_attrs and t.user_attrs.get(ATTR_REUSED_FROM) is None]
    if not quantized:
        return None
    steps = [t.user_attrs[ATTR_STEPS] for t in quantized]
    floor = study_attrs.get(FLOOR_ATTR) or {}
    per_trial = [sum(s.get(name, 0.0) for name in STEPS) for s in steps]
    pruned = [t for t in quantized if t.state.name == "PRUNED"]
    whole = [t.user_attrs[ATTR_STEPS] for t in quantized if t.state.name != "PRUNED"] or steps
    evaluate = statistics.median(s.get("evaluate_s", 0.0) for s in whole)  # a whole pass, not a pruned part
    eval_samples = floor.get("evaluation_samples")
    seen = [t.user_attrs.get(ATTR_SAMPLES_SEEN, eval_samples or 0) for t in pruned]
    scored_whole = len(quantized) - len(pruned)
    return {
        "floor_s": (round(floor["float_calibration_pass_s"] + evaluate, 4)
                    if "float_calibration_pass_s" in floor else None),
        "trial_median_s": round(statistics.median(per_trial), 4),
        "calibrations": sum(1 for s in steps if not s.get("calibration_cached") and not s.get("calibration_derived")),
        "calibrations_derived": sum(1 for s in steps if s.get("calibration_derived")),
        "quantizations": len(quantized),
        "inferences": None if eval_samples is None else scored_whole * eval_samples + sum(seen),
        "inferences_saved": None if eval_samples is None else sum(eval_samples - n for n in seen),
        "pruned": len(pruned),
        "steps": {name: round(statistics.median(s.get(name, 0.0) for s in steps), 4) for name in STEPS},
    }
