"""Budget pass: Spec in; QAS40x diagnostics out. The counts themselves come from `count_budget`.

Models produced = stage-1 grid configurations + sampler trials; disk = models x model size plus
the output dumps. Quark clamps n_trials to its "discrete space size", which ignores continuous
ranges (QUARK-FACTS F3); the script restores the requested count, so the clamp is only noted here.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..diagnostics import Diagnostic, diag
from ..model import Spec
from ..spacemath import count_configs, optuna_distinct, quark_discrete_size, stage1_space, stage2_template
from .data import sample_counts
from .intake import analysis
from .resolve import merged_space, spec_path, two_stage

MAX_TRIALS_WITHOUT_OPT_IN = 200
LARGE_DISK_BYTES = 100 * 10**9


@dataclass(frozen=True)
class Budget:
    requested_trials: int
    effective_trials: int  # sampler trials (or grid configurations with sampler Grid) that will run
    quark_would_run: int  # what Quark's own clamp would have left of requested_trials
    grid_configs: int  # stage-1 grid configurations of a two-stage search (0 otherwise)
    distinct_configs: float  # what the sampler stage can draw (math.inf with continuous ranges)
    models_produced: int
    model_bytes: int
    dump_bytes: int  # Quark's float-output .npy dumps, plus one quantized model's dumps at a time
    dump_is_lower_bound: bool  # dynamic output dims counted as 1, or a user reader of unknown length
    disk_estimate_bytes: int  # models_produced * model_bytes + dump_bytes


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

    Quark saves every evaluation sample's outputs of the float model as .npy in temp_dir, and the
    same for each quantized model while it is scored (removed after). A custom evaluator dumps nothing.
    """
    if spec.evaluation.metric is None or spec.search.engine == "qas":  # engine qas keeps outputs in memory
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
    produced = grid + effective
    size = model_bytes(spec)
    dumps, lower_bound = output_dump_bytes(spec)
    return Budget(requested_trials=n, effective_trials=effective, quark_would_run=quark_would_run,
                  grid_configs=grid, distinct_configs=distinct, models_produced=produced,
                  model_bytes=size, dump_bytes=dumps, dump_is_lower_bound=lower_bound,
                  disk_estimate_bytes=models_on_disk(spec, produced) * size + dumps)


def models_on_disk(spec: Spec, produced: int) -> int:
    """The most model files on disk at once: with keep_models pruning, the kept ones + the one being
    scored; engine qas adds the best_model.onnx copy."""
    if spec.search.engine != "qas":
        return produced
    keep = spec.output.keep_models
    kept = produced if keep == "all" else 1 if keep == "best" else int(keep.split("-", 1)[1])
    return min(produced, kept + 1) + 1


def check(spec: Spec) -> Iterator[Diagnostic]:
    b = count_budget(spec)
    trials_at = spec.search.path + ("n_trials",)
    n = b.requested_trials
    if n > MAX_TRIALS_WITHOUT_OPT_IN and not spec.search.allow_over_200_trials:
        yield diag("QAS401", f"n_trials {n} is above {MAX_TRIALS_WITHOUT_OPT_IN}: about {b.models_produced} "
                             f"quantized models and {gb(b.disk_estimate_bytes)} of disk", trials_at,
                   hint="lower n_trials, or add `allow_over_200_trials: true` under search")
    if spec.search.sampler == "Grid":
        total = int(b.distinct_configs)
        if n < total:
            yield diag("QAS404", f"Grid has {total} configurations; n_trials {n} runs only the first {n}",
                       trials_at, hint=f"set n_trials: {total} to try them all")
        elif n > total:
            yield diag("QAS404", f"Grid has only {total} configurations; {total} will run, not {n}",
                       trials_at, hint=f"set n_trials: {total}")
    elif two_stage(spec) and "algorithms" not in merged_space(spec):
        yield diag("QAS407", "two-stage search without `algorithms` runs only the grid stage; n_trials is unused",
                   trials_at, hint="add algorithms to the space, or set two_stage: false")
    elif b.distinct_configs < n:
        yield diag("QAS403", f"the sampler can draw only {int(b.distinct_configs)} distinct configurations, "
                             f"but n_trials is {n}: the rest would repeat", trials_at,
                   hint=f"set n_trials: {int(b.distinct_configs)}, or add a continuous range to a group")
    if spec.search.engine == "autosearchpro" and spec.search.sampler != "Grid" and b.quark_would_run < n <= b.distinct_configs:
        yield diag("QAS402", f"Quark would clamp n_trials {n} to {b.quark_would_run} (its space size ignores "
                             f"continuous ranges); the script restores {n}", trials_at)
    yield from _check_disk(spec, b)


def _check_disk(spec: Spec, b: Budget) -> Iterator[Diagnostic]:
    out = spec_path(spec, spec.output.dir)
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    at = spec.output.path + ("dir",)
    if b.disk_estimate_bytes > free:
        yield diag("QAS405", f"the search writes about {gb(b.disk_estimate_bytes)} ({b.models_produced} models of "
                             f"{gb(b.model_bytes)}, {gb(b.dump_bytes)} of output dumps), but only {gb(free)} "
                             f"is free at {probe}", at,
                   hint="free space, choose another output.dir, or lower n_trials")
    elif b.disk_estimate_bytes > LARGE_DISK_BYTES:
        yield diag("QAS406", f"the search writes about {gb(b.disk_estimate_bytes)} ({b.models_produced} models)",
                   at, hint="lower n_trials if that is more than intended")


def gb(n: int) -> str:
    """Bytes in, '1.23 GB', '4.56 MB' or '7.8 KB' out."""
    if n >= 10**8:
        return f"{n / 10**9:.2f} GB"
    return f"{n / 10**6:.2f} MB" if n >= 10**6 else f"{n / 10**3:.1f} KB"
