"""Facts resolved from a Spec alone: a Spec in; paths, the merged space, two-stage, device, direction, engine and
defaults out.

Pure functions, shared by the passes (which judge them) and by `facts.derive` (which records them
once for lowering); nothing here reports a diagnostic.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from compiler.check.images import image_files
from compiler.check.presets import preset_config
from compiler.check.samples import sample_files
from compiler.durations import seconds
from compiler.front.model import Spec
from compiler.runtime.contract import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HEARTBEAT_SECONDS,
    DEFAULT_MARGIN,
    DEFAULT_MAX_FAILURES,
    DEFAULT_MIN_TRIALS,
    DEFAULT_PATIENCE,
    ENGINES,
    OBJECTIVES,
    Engine,
)
from compiler.runtime.contract import TASK_METRICS as TASK_METRIC_K

MAXIMIZED_METRICS = ("cos", "psnr", "ssim")
TASK_METRICS = tuple(TASK_METRIC_K)  # top1, top5: accuracy against labels, minimized as the drop from the float model's


def spec_path(spec: Spec, relative: str) -> Path:
    """A path written in the spec in, an absolute normalized path out (relative to the spec's folder)."""
    return Path(os.path.normpath(spec.workspace / relative))


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key, anything else replaces; null removes the key. Inputs are not changed."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged_space(spec: Spec) -> dict[str, Any]:
    """The search space as written: the custom space, or the preset's with the override merged on."""
    if spec.search.space is not None:
        return copy.deepcopy(spec.search.space)
    base = preset_config(spec.search.preset)["search_space"]
    return deep_merge(base, spec.search.override or {})


def two_stage(spec: Spec) -> bool:
    """The spec's two_stage, else the preset's own setting, else False (a custom space)."""
    if spec.search.two_stage is not None:
        return spec.search.two_stage
    if spec.search.preset is not None:
        return bool(preset_config(spec.search.preset)["two_stage_search"])
    return False


def torch_device(device: str) -> str:
    """Spec device in, the torch device string out: ROCm builds of torch name their GPUs 'cuda'."""
    if device.startswith("rocm:"):
        return "cuda:" + device.split(":", 1)[1]
    return device


def direction(spec: Spec) -> str:
    """'maximize' for cos/psnr/ssim; 'minimize' for L1/L2, for top1/top5 (their drop) and for every user evaluator.

    Quark minimizes a user evaluator as `baseline - score` (QUARK-FACTS F6); the script orients
    the score so that this is right for `higher_is_better` either way.
    """
    return "maximize" if spec.evaluation.metric in MAXIMIZED_METRICS else "minimize"


def higher_is_better(spec: Spec) -> bool | None:
    """Whether the score a trial's value is a difference from grows with quality: the evaluator's declaration, True
    for top1/top5; None for a distance metric (its values are not differences from a float score)."""
    if spec.evaluation.metric in TASK_METRICS:
        return True
    return spec.evaluation.higher_is_better


def labels_settings(spec: Spec, output_dir: Path) -> dict[str, Any] | None:
    """evaluation.labels as the runtime reads it: {"array": name in each .npz sample} or {"file": path relative to
    the output folder, a .npy or .json}; None without labels."""
    written = spec.evaluation.labels
    if written is None:
        return None
    if not labels_is_file(written):
        return {"array": written}
    return {"file": os.path.relpath(spec_path(spec, written), output_dir).replace(os.sep, "/")}


def labels_is_file(written: str) -> bool:
    """A labels value names a file (.npy or .json, relative to the spec) rather than an array of the .npz samples."""
    return written.lower().endswith((".npy", ".json"))


def engine(spec: Spec) -> Engine:
    """The contract's record of the spec's search engine."""
    return ENGINES[spec.search.engine]


def quark_runs_search(record: Engine) -> bool:
    """True when Quark's own AutoSearchPro.run drives the search (its n_trials clamp, min-only grid and
    built-in metric sessions apply)."""
    return record.quark_loop


def max_failures(spec: Spec) -> int:
    """The spec's max_failures, or the contract's default when it writes none."""
    return spec.search.max_failures if spec.search.max_failures is not None else DEFAULT_MAX_FAILURES


def storage_kind(spec: Spec) -> str:
    """The spec's storage kind ("journal" | "url"), else the engine's default (its record's first storage)."""
    return spec.storage.kind if spec.storage is not None else engine(spec).storages[0]


def heartbeat_and_grace(spec: Spec) -> tuple[float, float]:
    """Storage url: (heartbeat interval, grace period) in seconds, the contract's defaults where the spec writes
    none."""
    s = spec.storage
    heartbeat = seconds(s.heartbeat) if s is not None and s.heartbeat is not None else DEFAULT_HEARTBEAT_SECONDS
    grace = seconds(s.grace_period) if s is not None and s.grace_period is not None else DEFAULT_GRACE_SECONDS
    return heartbeat, grace


def device_index(device: str) -> int | None:
    """cuda:N / rocm:N in, N out; None for cpu."""
    return int(device.split(":", 1)[1]) if ":" in device else None


def sample_counts(spec: Spec) -> dict[str, int | None]:
    """Samples per reader (None for a user reader class: unknown until it runs)."""
    counts: dict[str, int | None] = {}
    for key, reader in (("calibration", spec.calibration), ("evaluation", spec.evaluation.data)):
        if reader is None:
            continue
        if reader.folder is not None:
            counts[key] = len(sample_files(spec_path(spec, reader.folder), reader.limit))
        elif reader.images is not None:
            counts[key] = len(image_files(spec_path(spec, reader.images), reader.limit))
        else:
            counts[key] = None
    return counts


def accuracy_control(spec: Spec) -> bool:
    """keep_float.search strategy accuracy_control: its steps, not a sampler, fill the sampler stage (n_trials caps
    them)."""
    return (spec.keep_float.search or {}).get("strategy") == "accuracy_control"


def objectives(spec: Spec) -> list[str]:
    """search.objectives in contract.OBJECTIVES order (a trial's values come in this order); accuracy alone by
    default."""
    written = spec.search.objectives or ("accuracy",)
    return [name for name in OBJECTIVES if name in written]


def tolerance(spec: Spec) -> dict[str, Any] | None:
    """evaluation.tolerance as the runtime reads it: {"value", "relative"} ("1%" -> 0.01, relative); None: none."""
    written = spec.evaluation.tolerance
    if written is None:
        return None
    if isinstance(written, str):
        return {"value": float(written[:-1]) / 100, "relative": True}
    return {"value": float(written), "relative": False}


def stop(spec: Spec) -> dict[str, Any] | None:
    """search.stop as the runtime reads it, every default applied; None when the spec writes none."""
    s = spec.search.stop
    if s is None:
        return None
    return {"at_tolerance": s.at_tolerance,
            "min_trials": s.min_trials if s.min_trials is not None else DEFAULT_MIN_TRIALS,
            "patience": s.patience if s.patience is not None else DEFAULT_PATIENCE,
            "margin": float(s.margin) if s.margin is not None else DEFAULT_MARGIN,
            "timeout": seconds(s.timeout)}
