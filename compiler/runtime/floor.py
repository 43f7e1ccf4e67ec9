"""A search's cost floor: the float model and the calibration and evaluation readers in; the study's record of one
float pass over the calibration samples (what calibrating costs at least) and the sample counts out.

The floor F of a trial is that float pass plus one pass of a quantized model over the evaluation samples (each
trial's evaluate_s): a trial can cost no less, since it must see the calibration data once and be scored once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from . import contract
from .readers import samples_of


def float_pass_seconds(model_path: Path, samples: list[dict[str, Any]], device: str) -> float:
    """One onnxruntime pass of the float model over the samples (session built before the clock starts)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model_path), providers=contract.PROVIDERS[device.split(":")[0]])
    session.run(None, samples[0])  # the first run allocates: not part of the pass
    started = time.perf_counter()
    for sample in samples:
        session.run(None, sample)
    return time.perf_counter() - started


def floor_record(model_path: Path, calib: Any, evaluated: int | None, device: str) -> dict[str, Any]:
    """The calibration reader and how many samples scoring a model takes (None: a user evaluator's own, unknown) in;
    the study's floor record {"float_calibration_pass_s", "calibration_samples", "evaluation_samples"} out."""
    calibration = samples_of(calib)
    return {"float_calibration_pass_s": round(float_pass_seconds(model_path, calibration, device), 4),
            "calibration_samples": len(calibration), "evaluation_samples": evaluated}
