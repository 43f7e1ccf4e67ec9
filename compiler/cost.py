"""The rough time estimate: the spec's Facts in; seconds for the start-up, per trial class and a total range out.

Every term is linear in the model's size (MB, external data included) and node count, times the
samples or iterations that repeat it. A run is:
  start-up    fixed (imports of quark.onnx and torch, Quark's custom-op check, the study, the end of the
              run) + the float model scored once; + a fixed warm-up when any trial fine-tunes;
  plain trial fixed + per node + per MB (Quark's graph passes, sessions, writing the model), + per
              calibration sample (running and measuring every tensor) + per evaluation sample (scoring);
  fine-tuned  a plain trial, + per fine-tuned layer (Conv, Gemm, MatMul, ...): a fixed part and a part per
              fine-tuning sample (Quark runs the models to collect that layer's inputs), + per iteration:
              a fixed part per layer (torch's per-step overhead) and a part per MB of weights (AdaRound's
              soft rounding and both algorithms' optimizer steps touch every weight each iteration).
The batch's own compute is not counted: on the models measured it was small beside the rest.
Constants, and where and when they were measured: compiler/data/cost_model.json (bench/cost_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .facts import Facts
from .resources import load_data
from .spacemath import ALGORITHM_GROUPS

# Ops Quark's AdaRound/AdaQuant fine-tune one by one (their default target_op_type).
FINETUNED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "InstanceNormalization", "LayerNormalization")
# Quark's defaults for what a group does not set (AdaRoundConfig / AdaQuantConfig, amd-quark 0.13).
DEFAULT_ITERATIONS = {"adaround": 1000, "adaquant": 3000}
DEFAULT_DATA_SIZE = 10**9  # all the calibration samples


@dataclass(frozen=True)
class Workload:
    """What the estimate scales with, read from the Facts."""

    model_mb: float  # the model with its external data
    nodes: int  # every node, subgraphs included
    layers: int  # nodes of FINETUNED_OPS
    calibration: int  # samples (the assumed count for a user reader)
    evaluation: int  # samples scored per model (the calibration samples when there is no evaluation data)
    assumed: bool  # a sample count is the assumed one (a user reader or evaluator)
    gpu: bool


@dataclass(frozen=True)
class Finetune:
    """One fine-tuning class as the space can draw it: iterations (least, most) and the most data samples."""

    iterations: tuple[int, int]
    data_size: int


@dataclass(frozen=True)
class TimeEstimate:
    startup_s: float  # once per run, fine-tuning warm-up included when the space fine-tunes
    per_trial_s: dict[str, float]  # trial class ("plain", "adaround", "adaquant") -> seconds, at the most iterations
    iterations: dict[str, int]  # the most iterations a fine-tuning class can draw
    total_s: tuple[float, float]  # start-up + all trials at the cheapest class .. at the dearest
    samples_assumed: bool  # a user reader or evaluator: the sample count is the assumed one


def constants() -> dict[str, Any]:
    """cost_model.json's figures by name (each entry's "value", or the entry itself when it has none)."""
    data = load_data("cost_model.json")
    return {k: v["value"] if isinstance(v, dict) and "value" in v else v for k, v in data.items()}


def workload(facts: Facts) -> Workload:
    """The model's size, nodes and fine-tuned layers (intake) and its sample counts (the assumed one if unknown)."""
    counts = facts.analysis["op_counts"]
    calibration = facts.samples["calibration"]
    evaluation = facts.samples.get("evaluation", calibration) if facts.eval_data is not None else calibration
    assumed = calibration is None or evaluation is None or facts.evaluator is not None
    unknown = constants()["unknown_samples"]
    if facts.evaluator is not None and facts.eval_data is None:
        evaluation = None  # the user's evaluator reads data of its own
    return Workload(model_mb=facts.budget.model_bytes / 1e6, nodes=sum(counts.values()),
                    layers=sum(counts.get(op, 0) for op in FINETUNED_OPS),
                    calibration=unknown if calibration is None else calibration,
                    evaluation=unknown if evaluation is None else evaluation,
                    assumed=assumed, gpu=facts.torch_device != "cpu")


def per_sample(entry: dict[str, float], w: Workload) -> float:
    """A {per_node, per_mb} entry of cost_model.json: seconds for one sample of this model."""
    return entry["per_node"] * w.nodes + entry["per_mb"] * w.model_mb


def startup_s(w: Workload, finetunes: bool, c: dict[str, Any] | None = None) -> float:
    """Once per run: the fixed start-up and end, the float model's scoring, and the fine-tuning warm-up."""
    c = c or constants()
    gpu = c["gpu_speedup"]["inference"] if w.gpu else 1
    scoring = w.evaluation * per_sample(c["evaluation_s_per_sample"], w) / gpu
    return c["startup_s"] + scoring + (c["finetune_warmup_s"] if finetunes else 0.0)


def plain_s(w: Workload, c: dict[str, Any] | None = None) -> float:
    """One trial without fine-tuning: calibration, quantization, scoring."""
    c = c or constants()
    samples = (w.calibration * per_sample(c["calibration_s_per_sample"], w)
               + w.evaluation * per_sample(c["evaluation_s_per_sample"], w))
    fixed = c["trial_s"] + c["trial_s_per_node"] * w.nodes + c["trial_s_per_mb"] * w.model_mb
    return fixed + samples / (c["gpu_speedup"]["inference"] if w.gpu else 1)


def finetune_s(w: Workload, algorithm: str, iterations: int, data_size: int, c: dict[str, Any] | None = None) -> float:
    """The fine-tuning part of one trial (add plain_s for the trial)."""
    c = c or constants()
    layer, k = c["finetune_layer_s"], c[algorithm]
    collect = w.layers * (layer["fixed"] + min(data_size, w.calibration) * layer["per_sample_mb"] * w.model_mb)
    train = iterations * (w.layers * k["s_per_layer_iteration"] + w.model_mb * k["s_per_mb_iteration"])
    return (collect + train) / (c["gpu_speedup"]["finetune"] if w.gpu else 1)


def _ints(group: dict[str, Any], key: str, default: int) -> list[int]:
    """What a group key can draw: a range's ends, a list's values, or Quark's default."""
    value = group.get(key)
    if isinstance(value, dict):
        return [int(value.get("low", default)), int(value.get("high", default))]
    if isinstance(value, list) and value:
        return [int(v) for v in value if isinstance(v, int | float) and not isinstance(v, bool)] or [default]
    return [default]


def finetune_classes(space: dict[str, Any]) -> dict[str, Finetune]:
    """The fine-tuning algorithms the space can draw, each with its iterations (NumIterLR pairs too)."""
    choices = space.get("algorithms") or []
    found = {}
    for algorithm, group_name in ALGORITHM_GROUPS.items():
        if algorithm not in choices:
            continue
        group = space.get(group_name) or {}
        iterations = _ints(group, "num_iterations", DEFAULT_ITERATIONS[algorithm]) if "num_iterations" in group else []
        iterations += [int(p[0]) for p in group.get("NumIterLR", []) or [] if isinstance(p, list) and p]
        iterations = iterations or [DEFAULT_ITERATIONS[algorithm]]
        found[algorithm] = Finetune(iterations=(min(iterations), max(iterations)),
                                    data_size=max(_ints(group, "data_size", DEFAULT_DATA_SIZE)))
    return found


def estimate(facts: Facts, c: dict[str, Any] | None = None) -> TimeEstimate:
    """Reads the model's size and node counts, the sample counts, the space, the budget and the device."""
    c = c or constants()
    w = workload(facts)
    plain = plain_s(w, c)
    classes = finetune_classes(facts.space)
    low = {a: plain + finetune_s(w, a, f.iterations[0], f.data_size, c) for a, f in classes.items()}
    high = {a: plain + finetune_s(w, a, f.iterations[1], f.data_size, c) for a, f in classes.items()}
    choices = facts.space.get("algorithms") or []
    plain_drawn = not classes or any(a not in classes for a in choices)  # None (no algorithm) is a choice
    cheapest = plain if plain_drawn else min(low.values())
    budget = facts.budget
    start_low = startup_s(w, finetunes=not plain_drawn, c=c)
    start_high = startup_s(w, finetunes=bool(classes), c=c)
    fixed = budget.grid_configs * plain
    total = (start_low + fixed + budget.effective_trials * cheapest,
             start_high + fixed + budget.effective_trials * max([plain, *high.values()]))
    return TimeEstimate(startup_s=start_high, per_trial_s={"plain": plain, **high},
                        iterations={a: f.iterations[1] for a, f in classes.items()}, total_s=total,
                        samples_assumed=w.assumed)


def duration(seconds: float) -> str:
    """Seconds in, '45 s', '12 min' or '3.4 h' out."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
