"""Latency and size: a model's path (and the evaluation samples) in; its latency record and its bytes out.

Latency is measured with onnxruntime on the declared device's execution provider, with a fixed number of threads
(LATENCY_THREADS, sequential execution), after WARMUP_PASSES passes over the evaluation samples, over at least
MIN_PASSES timed passes and MIN_SECONDS: a pass runs every sample once, and its time per sample is one reading.
The record keeps the median, the quartiles, the number of readings, the provider and the threads, so every latency
says how it was measured; the float model is measured the same way, so the speed-up compares like with like.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable

from . import contract

LATENCY_THREADS = 1  # intra-op and inter-op threads: the same for every model and worker, so readings compare
WARMUP_PASSES = 2
MIN_PASSES = 10
MIN_SECONDS = 0.5
MAX_PASSES = 200


def model_size(path: Path) -> int:
    """The model file plus the external data files it names, in bytes."""
    total = path.stat().st_size
    try:
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 - not an ONNX file we can read (a test's stand-in): the file alone
        return total
    seen = set()
    for tensor in graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value not in seen:
                seen.add(entry.value)
                extra = path.parent / entry.value
                total += extra.stat().st_size if extra.is_file() else 0
    return total


def readings(run_pass: Callable[[], int], clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Time per sample (ms) of each timed pass, after the warm-up passes."""
    for _ in range(WARMUP_PASSES):
        run_pass()
    out: list[float] = []
    started = clock()
    while len(out) < MAX_PASSES and (len(out) < MIN_PASSES or clock() - started < MIN_SECONDS):
        begin = clock()
        samples = run_pass()
        out.append((clock() - begin) * 1000.0 / max(samples, 1))
    return out


def summary(times_ms: list[float], provider: str, threads: int) -> dict[str, Any]:
    """Readings in; the latency record out (median and quartiles in ms per sample)."""
    ordered = sorted(times_ms)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {"median_ms": statistics.median(ordered), "p25_ms": quartiles[0], "p75_ms": quartiles[2],
            "min_ms": ordered[0], "max_ms": ordered[-1], "readings": len(ordered), "provider": provider,
            "threads": threads}


class LatencyMeter:
    """Measures models on one device over one list of input feeds (the evaluation samples)."""

    def __init__(self, feeds: list[dict[str, Any]], device: str, custom_ops: str | None = None) -> None:
        if not feeds:
            raise ValueError("latency needs evaluation samples, and the reader gave none")
        self.feeds = feeds
        self.provider = contract.PROVIDERS[device.split(":")[0]][0]
        self.device_id = int(device.split(":")[1]) if ":" in device else None
        self.custom_ops = custom_ops  # Quark's custom-op library, for models that use its ops

    def session(self, model_path: Path) -> Any:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = LATENCY_THREADS
        options.inter_op_num_threads = LATENCY_THREADS
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        if self.custom_ops:
            options.register_custom_ops_library(self.custom_ops)
        provider: Any = self.provider if self.device_id is None else (self.provider, {"device_id": self.device_id})
        return onnxruntime.InferenceSession(str(model_path), options, providers=[provider])

    def __call__(self, model_path: Path) -> dict[str, Any]:
        session = self.session(model_path)
        if session.get_providers()[0] != self.provider:  # never a silent fallback to another device
            raise RuntimeError(f"onnxruntime ran {model_path.name} on {session.get_providers()[0]}, not {self.provider}")

        def run_pass() -> int:
            for feed in self.feeds:
                session.run(None, feed)
            return len(self.feeds)

        return summary(readings(run_pass), self.provider, LATENCY_THREADS)
