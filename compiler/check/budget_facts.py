"""Budget facts: a Spec in; the Budget (trials, grid size, models produced, disk estimate) out.

Models produced = stage-1 grid configurations + sampler trials; disk = models on disk x the quantized
model's size (weights at the widest bit width the space draws, + Q/DQ nodes) plus the output dumps. Quark
clamps n_trials to its "discrete space size", which ignores continuous ranges (QUARK-FACTS F3);
`quark_would_run` records that clamp. Judging the counts is the budget pass's job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.check.intake_facts import analysis
from compiler.check.resolved import engine, merged_space, sample_counts, spec_path, two_stage
from compiler.check.spacemath import count_configs, optuna_distinct, quark_discrete_size, stage1_space, stage2_template
from compiler.front.model import Spec
from compiler.resources import load_data
from compiler.runtime.accuracy_control import steps_bound
from compiler.runtime.contract import BEST_MODEL_FILE


@dataclass(frozen=True)
class Budget:
    requested_trials: int
    effective_trials: int  # sampler trials (or grid configurations with sampler Grid) that will run
    quark_would_run: int  # what Quark's own clamp would have left of requested_trials
    grid_configs: int  # stage-1 grid configurations of a two-stage search (0 otherwise)
    distinct_configs: float  # what the sampler stage can draw (math.inf with continuous ranges)
    models_produced: int
    model_bytes: int
    quantized_bytes: int  # one quantized model: quantized_model_bytes()
    dump_bytes: int  # Quark's float-output .npy dumps, plus one quantized model's dumps at a time
    dump_is_lower_bound: bool  # dynamic output dims counted as 1, or a user reader of unknown length
    disk_estimate_bytes: int  # the models on disk at once * quantized_bytes + dump_bytes


def model_bytes(spec: Spec) -> int:
    model = spec_path(spec, spec.model)
    size = model.stat().st_size if model.is_file() else 0
    data = external_data_path(spec)
    return size + (data.stat().st_size if data is not None else 0)


def external_data_path(spec: Spec) -> Path | None:
    """The sibling '<model>.onnx_data' (or '<model>.data') file, when there is one."""
    model = spec_path(spec, spec.model)
    for candidate in (model.with_name(model.name + "_data"), model.with_name(model.name + ".data")):
        if candidate.is_file():
            return candidate
    return None


ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
            "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1}


def output_dump_bytes(spec: Spec) -> tuple[int, bool]:
    """Bytes of Quark's built-in-metric output dumps, and whether that is only a lower bound.

    Quark saves every evaluation sample's outputs of the float model as .npy in its scratch folder, and the
    same for each quantized model while it is scored (removed after). A custom evaluator dumps
    nothing, nor does an engine that keeps outputs in memory.
    """
    if spec.evaluation.metric is None or engine(spec).keeps_outputs_in_memory:
        return 0, False
    per_sample, lower_bound = 0, False
    for out in analysis(spec)["outputs"]:
        elements = 1
        for dim in out["shape"] or [None]:
            if isinstance(dim, int) and dim > 0:
                elements *= dim
            else:
                lower_bound = True
        per_sample += elements * ITEMSIZE.get(out["dtype"], 4)
    counts = sample_counts(spec)
    samples = counts.get("evaluation", counts["calibration"]) if spec.evaluation.data else counts["calibration"]
    if samples is None:
        return 0, True
    return 2 * samples * per_sample, lower_bound


def count_budget(spec: Spec) -> Budget:
    space = merged_space(spec)
    n = spec.search.n_trials
    discrete = quark_discrete_size(space)
    quark_would_run = min(n, discrete)
    if spec.search.sampler == "Grid":
        stage_space = space
        grid = 0
        distinct = float(count_configs(space))
        effective = min(n, int(distinct))
    else:
        if two_stage(spec):
            grid = count_configs(stage1_space(space))
            stage_space = stage2_template(space)
        else:
            grid, stage_space = 0, space
        if two_stage(spec) and "algorithms" not in space:
            distinct, effective = 0.0, 0
        else:
            distinct = optuna_distinct(stage_space)
            effective = n if distinct == math.inf else min(n, int(distinct))
    search = spec.keep_float.search if engine(spec).supports("sensitivity") else None
    if search is not None and search.get("strategy") == "accuracy_control" and spec.search.sampler != "Grid":
        # its steps on one configuration (the grid winner, or the space's one): at most what the strategy can ask for
        distinct = float(max(distinct, 1) * steps_bound(sum(analysis(spec)["quantizable_op_counts"].values())))
        effective = min(n, int(distinct))
    elif search is not None and effective:  # one more sampled parameter (the sensitivity pass refuses it elsewhere)
        distinct = distinct * len(search["top_k"]) if "top_k" in search else math.inf  # coverage, partitioned: ranges
        effective = n if distinct == math.inf else min(n, int(distinct))
    produced = grid + effective
    size = model_bytes(spec)
    quantized = quantized_model_bytes(size, weight_bits(space), sum(analysis(spec)["quantizable_op_counts"].values()))
    dumps, lower_bound = output_dump_bytes(spec)
    return Budget(requested_trials=n, effective_trials=effective, quark_would_run=quark_would_run,
                  grid_configs=grid, distinct_configs=distinct, models_produced=produced,
                  model_bytes=size, quantized_bytes=quantized, dump_bytes=dumps, dump_is_lower_bound=lower_bound,
                  disk_estimate_bytes=models_on_disk(spec, produced) * quantized + dumps)


# Bits of a stored weight by the weight spec class, and by a weight_params.data_type that overrides it (Quark's
# names). BFP16 shares an exponent per block of 8-bit mantissas: counted as 16, the safe side for a disk estimate.
SPEC_BITS = {"XInt8Spec": 8, "Int8Spec": 8, "UInt8Spec": 8, "Int16Spec": 16, "UInt16Spec": 16, "BFloat16Spec": 16,
             "BFP16Spec": 16}
DATA_TYPE_BITS = {"Int8": 8, "UInt8": 8, "Int16": 16, "UInt16": 16, "BFP16": 16, "BFloat16": 16, "Int32": 32,
                  "UInt32": 32}


def weight_bits(space: dict[str, Any]) -> int:
    """The widest stored weight the space can draw (32, float size, for anything unknown)."""
    specs = space.get("weight") if isinstance(space.get("weight"), list) else [None]
    bits = [SPEC_BITS.get(s, 32) for s in specs] or [32]
    group = space.get("weight_params")
    types = group.get("data_type") if isinstance(group, dict) else None
    if isinstance(types, list) and types:
        bits = [DATA_TYPE_BITS.get(t, 32) for t in types]
    return max(bits)


def quantized_model_bytes(float_bytes: int, bits: int, quantized_nodes: int, size: dict[str, Any] | None = None) -> int:
    """One quantized model file: the float model's bytes (mostly weights) scaled by bits/32, plus the Q/DQ nodes, scales
    and zero points Quark adds around each quantized node (cost_model.json's quantized_size; bench/cost_model.py)."""
    per_node = (size or load_data("cost_model.json")["quantized_size"])["qdq_bytes_per_node"]
    return int(float_bytes * bits / 32 + per_node * quantized_nodes)


def models_on_disk(spec: Spec, produced: int) -> int:
    """The most model files on disk at once: with keep_models pruning, the kept ones + the one being
    scored; plus the winner's copy for an engine that writes best_model.onnx."""
    record = engine(spec)
    if record.supports("keep_models"):
        keep = spec.output.keep_models
        kept = produced if keep == "all" else 1 if keep == "best" else int(keep.split("-", 1)[1])
        produced = min(produced, kept + 1)
    return produced + (1 if BEST_MODEL_FILE in record.writes else 0)


def gb(n: int) -> str:
    """Bytes in, '1.23 GB', '4.56 MB' or '7.8 KB' out."""
    if n >= 10**8:
        return f"{n / 10**9:.2f} GB"
    return f"{n / 10**6:.2f} MB" if n >= 10**6 else f"{n / 10**3:.1f} KB"
