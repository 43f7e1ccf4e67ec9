"""Measuring: a float model, a quantizer, a base configuration and samples in; each candidate's per-sample drop of
the output error when it runs in float (its Q/DQ bypassed in the quantized model) out.

Cost: one quantization with the base configuration, then one inference pass per candidate over the samples.
Standard library at import time (numpy, onnx, onnxruntime inside the functions).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import contract
from .sensitivity_graph import bypass, candidates, unranked_bodies


def sample_errors(method: str, reference: list[Any], found: list[Any]) -> list[float]:
    """Each sample's error of `found` against `reference` (flattened outputs): L2 (mean squared), KL (softmax of the
    reference to softmax of the found) or cosine (1 - cosine similarity)."""
    import numpy as np

    errors = []
    for f, q in zip(reference, found, strict=True):
        f, q = f.astype(np.float64), q.astype(np.float64)
        if method == "L2":
            errors.append(float(np.mean((f - q) ** 2)))
        elif method == "cosine":
            norm = float(np.linalg.norm(f) * np.linalg.norm(q))
            errors.append(1.0 - float(np.dot(f, q)) / norm if norm > 0 else float(np.any(f != q)))
        else:  # KL
            p, r = np.exp(f - f.max()), np.exp(q - q.max())
            p, r = p / p.sum(), r / r.sum()
            errors.append(float(np.sum(p * (np.log(p + 1e-12) - np.log(r + 1e-12)))))
    return errors


def sample_list(reader: Any, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` samples of a reader (rewound before and after)."""
    reader.reset_iter()
    samples = []
    while len(samples) < limit:
        sample = reader.get_next()
        if sample is None:
            break
        samples.append(sample)
    reader.reset_iter()
    return samples


class Runner:
    """Runs models (ModelProto) on the samples: each sample's outputs flattened into one vector."""

    def __init__(self, samples: list[dict[str, Any]], device: str) -> None:
        self.samples, self.device = samples, device
        self.inferences = 0

    def __call__(self, model: Any) -> list[Any]:
        import numpy as np
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # As written: onnxruntime's optimizer re-fuses a bypassed graph's remaining Q/DQ and undoes the bypass
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            from quark.onnx.operators.custom_ops import get_library_path

            options.register_custom_ops_library(get_library_path(self.device.split(":")[0].upper()))
        except ImportError:  # plain QDQ models need no custom ops
            pass
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=contract.PROVIDERS[self.device.split(":")[0]])
        self.inferences += len(self.samples)
        return [np.concatenate([o.reshape(-1) for o in session.run(None, s)]) for s in self.samples]


def measure(float_path: Path, quantize: Callable[[dict[str, Any], Path, list[Any]], None], base: dict[str, Any],
            exclusions: list[Any], runner: Runner, method: str, work: Path) -> dict[str, Any]:
    """Quantize once with `base`, then each candidate's per-sample drops: the sample's error with the whole model
    quantized minus its error with the candidate in float (negative: keeping it float made that sample worse).

    Candidates are the quantized nodes with Q/DQ of their own (fixed exclusions are float already), named by the
    float nodes they came from. A candidate whose bypassed model does not run is left out and listed."""
    import onnx

    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    quantized_path = work / "sensitivity_base.onnx"
    quantize(base, quantized_path, exclusions)
    quantize_s = time.monotonic() - started
    float_model = onnx.load(str(float_path))
    quantized = onnx.load(str(quantized_path))
    unmapped: list[str] = []
    found = candidates(float_model, quantized, unmapped)
    started = time.monotonic()
    reference = runner(float_model)
    baseline = sample_errors(method, reference, runner(quantized))
    scored, skipped = {}, {}
    for candidate in found:
        try:
            errors = sample_errors(method, reference, runner(bypass(quantized, float_model, [candidate])))
        except Exception as error:  # noqa: BLE001 - onnxruntime refusing one bypassed graph: say so, go on
            skipped[candidate.name] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            continue
        scored[candidate.name] = {"nodes": list(candidate.nodes), "quantized_nodes": [
            quantized.graph.node[r.sink].name for r in candidate.regions],
            "drops": [b - e for b, e in zip(baseline, errors, strict=True)]}
    return {"baseline_errors": baseline, "candidates": scored, "skipped": skipped,
            "not_ranked": unranked_bodies(float_model), "unmapped": unmapped,
            "cost": {"quantizations": 1, "quantize_s": round(quantize_s, 3), "candidates": len(found),
                     "inferences": runner.inferences, "infer_s": round(time.monotonic() - started, 3)}}
