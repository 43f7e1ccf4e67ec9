"""The rough time estimate: the spec's Facts in, seconds per trial class and a total range out.

A trial is one calibration + quantization, plus AdaRound/AdaQuant iterations when the sampled
config has an algorithm. Constants and where they come from: compiler/data/cost_model.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .facts import Facts
from .resources import load_data
from .spacemath import ALGORITHM_GROUPS


@dataclass(frozen=True)
class TimeEstimate:
    per_trial_s: dict[str, float]  # trial class ("plain", "adaround", "adaquant") -> seconds
    iterations: dict[str, int]  # the most iterations a fine-tuning class can draw
    total_s: tuple[float, float]  # start-up + all trials at the cheapest class .. at the dearest
    samples_assumed: bool  # a user reader: the sample count is the assumed one


def _max_iterations(group: dict[str, Any]) -> int:
    best = 0
    value = group.get("num_iterations")
    if isinstance(value, dict):
        best = int(value.get("high", 0))
    elif isinstance(value, list) and value:
        best = max(int(v) for v in value)
    for pair in group.get("NumIterLR", []) or []:
        if isinstance(pair, list) and pair:
            best = max(best, int(pair[0]))
    return best or 1000  # Quark's default num_iterations


def estimate(facts: Facts) -> TimeEstimate:
    """Reads the space, the budget, the calibration sample count and whether the device is a GPU."""
    c = load_data("cost_model.json")
    budget = facts.budget
    gpu = facts.torch_device != "cpu"
    mb = budget.model_bytes / 1e6
    samples = facts.samples["calibration"]
    assumed = samples is None
    samples = c["unknown_samples"]["value"] if samples is None else samples
    calibration = c["calibration_s_per_sample_mb"]["value"] * samples * mb
    plain = c["plain_trial_overhead_s"]["value"] + calibration / (c["gpu_speedup"]["calibration"] if gpu else 1)
    per_trial, iterations = {"plain": plain}, {}
    space = facts.space  # device fields set: they do not change the iteration counts
    choices = space.get("algorithms") or []
    for algorithm, group_name in ALGORITHM_GROUPS.items():
        if algorithm in choices:
            n = _max_iterations(space.get(group_name) or {})
            per_iteration = c["finetune_s_per_iteration"]["value"] + c["finetune_s_per_iteration_mb"]["value"] * mb
            per_trial[algorithm] = plain + n * per_iteration / (c["gpu_speedup"]["finetune"] if gpu else 1)
            iterations[algorithm] = n
    sampled = budget.effective_trials
    if None in choices or not choices:
        cheapest = plain
    else:
        cheapest = min(v for k, v in per_trial.items() if k != "plain")
    start = c["run_overhead_s"]["value"]
    low = start + budget.grid_configs * plain + sampled * cheapest
    high = start + budget.grid_configs * plain + sampled * max(per_trial.values())
    return TimeEstimate(per_trial_s=per_trial, iterations=iterations, total_s=(low, high), samples_assumed=assumed)


def duration(seconds: float) -> str:
    """Seconds in, '45 s', '12 min' or '3.4 h' out."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
