"""Scoring: a quantized model's path in; its objective value out (the user evaluator, or a Quark metric against the float outputs)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

from . import contract
from .workers import CPUS_ENV
from .readers import load_user_object


def make_evaluator(evaluator: dict[str, Any] | None, here: Path) -> Callable[[str], float] | None:
    """The user's evaluator, oriented so that the minimized `baseline - score` is right for either direction (F6)."""
    if evaluator is None:
        return None
    user_function = load_user_object(here / evaluator["file"], evaluator["function"])
    sign = 1.0 if evaluator["higher_is_better"] else -1.0

    def oriented_score(model_path: str) -> float:
        score = float(user_function(model_path))
        if not math.isfinite(score):
            raise ValueError(f"evaluator returned {score} for {model_path}")
        return sign * score

    return oriented_score


class Scorer:
    """Scores models against the float model: the oriented user evaluator as baseline - score, or a Quark metric."""

    def __init__(self, metric: str | None, evaluator: Callable[[str], float] | None, eval_reader: Any,
                 device: str) -> None:
        self.metric = metric
        self.evaluator = evaluator
        self.eval_reader = eval_reader
        self.device = device
        self.baseline: Any = None

    def outputs(self, model_path: Path) -> list[Any]:
        """Every evaluation sample's outputs, flattened into one vector a sample (Quark's custom ops registered)."""
        import numpy as np
        import onnxruntime
        from quark.onnx.operators.custom_ops import get_library_path
        from quark.onnx.utils.model_utils import create_infer_session_for_onnx_model

        kind = self.device.split(":")[0]
        options = onnxruntime.SessionOptions()
        threads = os.environ.get(CPUS_ENV)  # a worker of several on this machine: its share of the cores
        if threads:
            options.intra_op_num_threads = len(threads.split(","))
        options.register_custom_ops_library(get_library_path(kind.upper()))
        session = create_infer_session_for_onnx_model(str(model_path), options, providers=contract.PROVIDERS[kind])
        self.eval_reader.reset_iter()
        found = [np.concatenate([o.reshape(-1) for o in session.run(None, sample)]) for sample in self.eval_reader]
        if not found:
            raise ValueError("the evaluation reader gave no samples")
        return found

    def score_float(self, model_path: Path) -> None:
        """Score the float model once: the baseline every quantized model is compared with."""
        self.baseline = self.evaluator(str(model_path)) if self.evaluator is not None else self.outputs(model_path)

    def score(self, model_path: Path) -> float:
        """A quantized model in; its finite objective value out (raises ValueError otherwise)."""
        if self.evaluator is not None:
            value = self.baseline - self.evaluator(str(model_path))
        else:
            import numpy as np
            from quark.onnx.quantization.auto_search.auto_search_pro import METRICS

            pairs = zip(self.baseline, self.outputs(model_path), strict=True)
            value = float(np.mean([METRICS[self.metric](fp, q) for fp, q in pairs]))
        if not math.isfinite(value):
            raise ValueError(f"the score of {model_path.name} is {value}")
        return float(value)
