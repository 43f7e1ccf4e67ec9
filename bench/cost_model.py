"""Measure the constants behind the compiler's rough time estimate: nothing in, a JSON object out.

Quantizes the example model (XINT8) on this machine's CPU with plain calibration and with
AdaRound/AdaQuant at two iteration counts, and fits:
  plain trial  ~ seconds_per_sample_mb * calibration samples * model MB  (+ a fixed overhead)
  fine-tuning  ~ seconds_per_iteration_mb * iterations * model MB
Compare the printed figures with compiler/data/cost_model.json; they are CPU figures, and the
GPU speed-up in that file is an assumption, not a measurement.

  .venv/bin/python bench/cost_model.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "specs" / "example"


class Reader:
    def __init__(self, folder: Path, name: str):
        self.samples = [{name: np.load(p)} for p in sorted(folder.glob("*.npy"))]
        self.index = 0

    def get_next(self):
        if self.index >= len(self.samples):
            return None
        self.index += 1
        return self.samples[self.index - 1]

    def rewind(self):
        self.index = 0


def quantize(algorithm: str | None, iterations: int, out: Path) -> float:
    from quark.onnx import AdaQuantConfig, AdaRoundConfig, ModelQuantizer, QConfig, QLayerConfig, XInt8Spec

    import onnx

    model = EXAMPLE / "models" / "tinycnn.onnx"
    name = onnx.load(str(model)).graph.input[0].name
    algos = []
    if algorithm == "adaround":
        algos = [AdaRoundConfig(num_iterations=iterations, optim_device="cpu", infer_device="cpu")]
    elif algorithm == "adaquant":
        algos = [AdaQuantConfig(num_iterations=iterations, optim_device="cpu", infer_device="cpu")]
    config = QConfig(QLayerConfig(activation=XInt8Spec(), weight=XInt8Spec()), algo_config=algos)
    reader = Reader(EXAMPLE / "data" / "calib", name)
    start = time.perf_counter()
    ModelQuantizer(config).quantize_model(str(model), str(out), reader)
    return time.perf_counter() - start


def main() -> None:
    # Quark prints tables on stdout: keep stdout for the JSON only.
    json_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    model_mb = (EXAMPLE / "models" / "tinycnn.onnx").stat().st_size / 1e6
    samples = len(list((EXAMPLE / "data" / "calib").glob("*.npy")))
    with tempfile.TemporaryDirectory() as tmp:
        quantize(None, 0, Path(tmp) / "warm.onnx")  # JIT and import costs
        plain = min(quantize(None, 0, Path(tmp) / f"p{i}.onnx") for i in range(3))
        figures = {"model_mb": model_mb, "calibration_samples": samples, "plain_s": plain}
        for algorithm in ("adaround", "adaquant"):
            quantize(algorithm, 1, Path(tmp) / f"{algorithm}warm.onnx")
            low = quantize(algorithm, 20, Path(tmp) / f"{algorithm}20.onnx")
            high = quantize(algorithm, 520, Path(tmp) / f"{algorithm}520.onnx")
            figures[f"{algorithm}_s"] = {"20": low, "520": high}
            figures[f"{algorithm}_s_per_iteration"] = (high - low) / 500
            figures[f"{algorithm}_s_per_iteration_mb"] = (high - low) / 500 / model_mb
    figures["plain_s_per_sample_mb"] = plain / samples / model_mb
    json.dump(figures, json_out, indent=2)
    json_out.write("\n")
    json_out.flush()


if __name__ == "__main__":
    main()
