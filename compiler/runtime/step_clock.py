"""Where a quantization's time goes: Quark's calibration and post-quantization algorithms timed from inside; one
quantization's steps (calibrate_s, quantize_s, finetune_s) out.

Quark's quantize_static calibrates (run_calibration), quantizes, then runs the post-quantization algorithms (fast
fine-tuning: AdaRound / AdaQuant) in apply_post_quant_algorithms. `install()` wraps those two names where quantize.py
and postproc.py look them up, so their time is counted without changing what they do; quantize_s is the rest of the
quantization (pre-processing, the QDQ graph, writing the model).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

# (module, attribute, step) Quark's code calls through the module's namespace
TIMED = (("quark.onnx.quantization.quantize", "run_calibration", "calibrate_s"),
         ("quark.onnx.postprocess.postproc", "apply_post_quant_algorithms", "finetune_s"))


class StepClock:
    """Accumulates the wrapped steps' seconds for the quantization being measured."""

    def __init__(self) -> None:
        self.current: dict[str, float] | None = None
        self.installed = False

    def install(self) -> None:
        """Wrap Quark's calibration and post-quantization functions (once per process)."""
        import importlib

        if self.installed:
            return
        for module_name, attribute, step in TIMED:
            module = importlib.import_module(module_name)
            setattr(module, attribute, self._timed(getattr(module, attribute), step))
        self.installed = True

    def _timed(self, function: Callable[..., Any], step: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                if self.current is not None:
                    self.current[step] = self.current.get(step, 0.0) + time.perf_counter() - start
        return timed

    @contextlib.contextmanager
    def measuring(self) -> Iterator[dict[str, Any]]:
        """The steps of the quantization run in the block: the dict yielded is filled when the block ends, with
        calibrate_s and finetune_s (0.0 when the step did not run) and quantize_s (the rest)."""
        steps: dict[str, Any] = {}
        self.current = {}
        start = time.perf_counter()
        try:
            yield steps
        finally:
            total = time.perf_counter() - start
            timed, self.current = self.current, None
            calibrate, finetune = timed.get("calibrate_s", 0.0), timed.get("finetune_s", 0.0)
            steps.update(calibrate_s=round(calibrate, 4), finetune_s=round(finetune, 4),
                         quantize_s=round(max(total - calibrate - finetune, 0.0), 4))


CLOCK = StepClock()  # the process's one clock: Quark's functions are wrapped once
