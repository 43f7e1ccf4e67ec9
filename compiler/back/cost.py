"""The rough time estimate: the spec's Facts in; seconds for the start-up, the sensitivity stage, per trial class and a
total range out.

A sample's forward pass is linear in the model's node count, its size (MB, external data included) and its size times
the input's elements (millions): convolutions cost their weights times the positions they slide over, so a detector's
high-resolution input costs more per MB than a classifier's. A run is:
  start-up    fixed (imports of quark.onnx and torch, Quark's custom-op check, the study, the end of the run) + the
              float model scored once; + a fixed warm-up when any trial fine-tunes;
  sensitivity with keep_float.search: one quantization (a plain trial) and, per candidate (each quantized node, + the
              float and quantized references), a session and one forward pass per sensitivity sample;
  plain trial fixed + per node + per MB (Quark's graph passes, sessions, writing the model), + per calibration sample
              (running and measuring every tensor) + per evaluation sample (scoring);
  fine-tuned  a plain trial, + per fine-tuned layer (Conv, Gemm, MatMul, ...): a fixed part and one forward pass of
              the model per fine-tuning sample (Quark runs the models to collect that layer's inputs), + per iteration:
              a fixed part per layer (torch's per-step overhead) and, per sample of the batch, a part per MB and per
              MB x input elements (every layer's forward and backward step on its weights).
Plain and fine-tuning parts are scaled by run_factor: their shape comes from in-process timings of Quark's parts,
their level from the compiled script's real runs.
Trials a sampler draws again are answered from the study (free): with D distinct configurations, n draws hold about
D(1 - (1 - 1/D)^n) distinct ones. N workers run the trials N at a time (at most one per trial); on a CPU they share
the cores, so the time per trial grows there (not modelled).
Constants, and where and when they were measured: compiler/data/cost_model.json (bench/cost_model.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from compiler.back.facts import Facts
from compiler.check.spacemath import ALGORITHM_GROUPS
from compiler.resources import load_data

# Ops Quark's AdaRound/AdaQuant fine-tune one by one (their default target_op_type).
FINETUNED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "InstanceNormalization", "LayerNormalization")
# Quark's defaults for what a group does not set (AdaRoundConfig / AdaQuantConfig, amd-quark 0.13).
DEFAULT_ITERATIONS = {"adaround": 1000, "adaquant": 3000}
DEFAULT_DATA_SIZE = 10**9  # all the calibration samples
DEFAULT_BATCH = 1


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
    input_melems: float = 0.0  # elements of one sample's inputs, in millions (dynamic dims counted as 1)
    quantized_nodes: int = 0  # nodes of ops Quark quantizes: the sensitivity stage's candidates


@dataclass(frozen=True)
class Finetune:
    """One fine-tuning class as the space can draw it: iterations (least, most), the most data samples, the batch."""

    iterations: tuple[int, int]
    data_size: int
    batch: int = 1


@dataclass(frozen=True)
class TimeEstimate:
    startup_s: float  # once per run, fine-tuning warm-up included when the space fine-tunes
    per_trial_s: dict[str, float]  # trial class ("plain", "adaround", "adaquant") -> seconds, at the most iterations
    iterations: dict[str, int]  # the most iterations a fine-tuning class can draw
    total_s: tuple[float, float]  # start-up + sensitivity + all trials at the cheapest class .. at the dearest
    samples_assumed: bool  # a user reader or evaluator: the sample count is the assumed one
    sensitivity_s: float = 0.0  # the ranking before the search (keep_float.search), else 0
    parallelism: float = 1.0  # how many trials the workers run at once, in effect
    new_trials: tuple[float, float] = (0.0, 0.0)  # sampler trials really quantized (least, most): the rest are repeats


def constants() -> dict[str, Any]:
    """cost_model.json's figures by name (each entry's "value", or the entry itself when it has none)."""
    data = load_data("cost_model.json")
    return {k: v["value"] if isinstance(v, dict) and "value" in v else v for k, v in data.items()}


def input_melems(inputs: list[dict[str, Any]]) -> float:
    """One sample's input elements in millions, from intake's inputs (a dynamic dim counts as 1)."""
    total = 0
    for i in inputs:
        elements = 1
        for dim in i.get("shape") or []:
            elements *= dim if isinstance(dim, int) and dim > 0 else 1
        total += elements
    return total / 1e6


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
                    assumed=assumed, gpu=facts.torch_device != "cpu",
                    input_melems=input_melems(facts.analysis.get("inputs", [])),
                    quantized_nodes=sum(facts.analysis.get("quantizable_op_counts", {}).values()))


def per_sample(entry: dict[str, float], w: Workload) -> float:
    """A {per_node, per_mb, per_mb_melem} entry of cost_model.json: seconds for one sample of this model."""
    return (entry["per_node"] * w.nodes + entry["per_mb"] * w.model_mb
            + entry.get("per_mb_melem", 0.0) * w.model_mb * w.input_melems)


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
    return (fixed + samples / (c["gpu_speedup"]["inference"] if w.gpu else 1)) * c["run_factor"]["plain"]


def finetune_s(w: Workload, algorithm: str, iterations: int, data_size: int, c: dict[str, Any] | None = None,
               batch: int = 1) -> float:
    """The fine-tuning part of one trial (add plain_s for the trial): per layer, the data collection (one forward pass
    of the model per sample) and, per iteration, torch's step on `batch` samples of that layer."""
    c = c or constants()
    layer, k = c["finetune_layer_s"], c[algorithm]
    forward = per_sample(c["evaluation_s_per_sample"], w)
    collect = w.layers * (layer["fixed"] + min(data_size, w.calibration) * forward * layer["per_forward"])
    step = (w.layers * k["s_per_layer_iteration"]
            + batch * w.model_mb * (k["s_per_mb_sample_iteration"]
                                    + k["s_per_mb_melem_sample_iteration"] * w.input_melems))
    return (collect + iterations * step) * c["run_factor"]["finetune"] / (c["gpu_speedup"]["finetune"] if w.gpu else 1)


def sensitivity_s(w: Workload, samples: int, c: dict[str, Any] | None = None) -> float:
    """The ranking before a keep_float.search: one quantization, then per candidate (+ the two references) a session
    on the bypassed graph and one forward pass per sample."""
    c = c or constants()
    entry = c["sensitivity_candidate_s"]
    passes = min(samples, w.evaluation) * per_sample(c["evaluation_s_per_sample"], w)
    per_candidate = entry["fixed"] + entry["per_node"] * w.nodes + passes
    return plain_s(w, c) + (w.quantized_nodes + 2) * per_candidate


def distinct_draws(trials: int, distinct: float) -> float:
    """Of `trials` draws among `distinct` configurations, how many are new (the rest are answered from the study)."""
    if trials <= 0 or math.isinf(distinct) or distinct >= 10**9:
        return float(max(trials, 0))
    return distinct * (1 - (1 - 1 / distinct) ** trials) if distinct > 0 else 0.0


def parallelism(workers: int, trials: int, c: dict[str, Any] | None = None) -> float:
    """Trials run at once by `workers` processes on one machine (bench/workers.py: the second worker adds a
    fraction)."""
    c = c or constants()
    n = max(1, min(workers, trials))
    return 1 + (n - 1) * c["workers"]["efficiency"]


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
                                    data_size=max(_ints(group, "data_size", DEFAULT_DATA_SIZE)),
                                    batch=max(_ints(group, "batch_size", DEFAULT_BATCH)))
    return found


def estimate(facts: Facts, c: dict[str, Any] | None = None) -> TimeEstimate:
    """Reads the model's size, node counts and inputs, the sample counts, the space, the budget, keep_float.search,
    the workers and the device."""
    c = c or constants()
    w = workload(facts)
    plain = plain_s(w, c)
    classes = finetune_classes(facts.space)
    low = {a: plain + finetune_s(w, a, f.iterations[0], f.data_size, c, f.batch) for a, f in classes.items()}
    high = {a: plain + finetune_s(w, a, f.iterations[1], f.data_size, c, f.batch) for a, f in classes.items()}
    choices = facts.space.get("algorithms") or []
    plain_drawn = not classes or any(a not in classes for a in choices)  # None (no algorithm) is a choice
    cheapest = plain if plain_drawn else min(low.values())
    budget = facts.budget
    sens = facts.sensitivity
    ranking = sensitivity_s(w, sens["samples"], c) if sens is not None and sens.get("search") is not None else 0.0
    new = (distinct_draws(budget.effective_trials, budget.distinct_configs),
           float(min(budget.effective_trials, budget.distinct_configs)))
    if sens is not None and (sens.get("search") or {}).get("strategy") == "accuracy_control":
        new = (float(min(budget.effective_trials, 1)), float(budget.effective_trials))  # the quantized model may do
    at_once = parallelism(facts.workers, budget.grid_configs + budget.effective_trials, c)
    start_low = startup_s(w, finetunes=not plain_drawn, c=c)
    start_high = startup_s(w, finetunes=bool(classes), c=c)
    fixed = budget.grid_configs * plain
    total = (start_low + ranking + (fixed + new[0] * cheapest) / at_once,
             start_high + ranking + (fixed + new[1] * max([plain, *high.values()])) / at_once)
    return TimeEstimate(startup_s=start_high, per_trial_s={"plain": plain, **high},
                        iterations={a: f.iterations[1] for a, f in classes.items()}, total_s=total,
                        samples_assumed=w.assumed, sensitivity_s=ranking, parallelism=round(at_once, 3),
                        new_trials=(round(new[0], 2), round(new[1], 2)))


def duration(seconds: float) -> str:
    """Seconds in, '45 s', '12 min' or '3.4 h' out."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
