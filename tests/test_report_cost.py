"""The report's cost section from recorded trial steps: the floor, the median trial, the calibrations (cache misses),
the quantizations (repeats answered from the study left out), inferences and those pruning saved."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from compiler.report.trial_costs import cost_section
from compiler.runtime import contract


def trial(state: str, steps: dict[str, Any] | None, **attrs: Any) -> Any:
    user_attrs = dict(attrs) | ({contract.ATTR_STEPS: steps} if steps is not None else {})
    return SimpleNamespace(state=SimpleNamespace(name=state), user_attrs=user_attrs)


def steps(calibrate: float, evaluate: float, cached: bool, derived: bool = False) -> dict[str, Any]:
    return {"calibrate_s": calibrate, "quantize_s": 1.0, "finetune_s": 0.0, "evaluate_s": evaluate,
            "latency_s": 0.0, "calibration_cached": cached, "calibration_derived": derived}


def test_the_cost_section_counts_what_ran_and_what_pruning_saved() -> None:
    trials = [trial("COMPLETE", steps(4.0, 0.5, False)),
              trial("COMPLETE", steps(0.0, 0.5, True)),
              trial("COMPLETE", steps(0.5, 0.5, False, derived=True)),  # ranges from a kept collection
              trial("COMPLETE", steps(0.0, 0.5, True), **{contract.ATTR_REUSED_FROM: 1}),  # answered from the study
              trial("PRUNED", steps(0.0, 0.1, True), **{contract.ATTR_SAMPLES_SEEN: 3}),
              trial("COMPLETE", None)]  # a study from before steps were recorded
    floor = {"float_calibration_pass_s": 0.25, "calibration_samples": 8, "evaluation_samples": 10}
    cost = cost_section(trials, {contract.FLOOR_ATTR: floor})
    assert cost == {"floor_s": 0.75, "trial_median_s": 1.75, "calibrations": 1, "calibrations_derived": 1,
                    "quantizations": 4, "inferences": 3 * 10 + 3, "inferences_saved": 7, "pruned": 1,
                    "steps": {"calibrate_s": 0.25, "quantize_s": 1.0, "finetune_s": 0.0, "evaluate_s": 0.5,
                              "latency_s": 0.0, "prune_s": 0.0}}


def test_without_recorded_steps_or_floor_the_section_says_what_it_cannot_know() -> None:
    assert cost_section([trial("COMPLETE", None)], {}) is None
    cost = cost_section([trial("COMPLETE", steps(2.0, 0.5, False))], {})
    assert cost["floor_s"] is None and cost["inferences"] is None and cost["calibrations"] == 1
