"""Latency and size: a model's path (and the evaluation samples) in; its latency record and its bytes out.

On a shared machine a model's time alone is mostly the machine's load: the same float model measured 0.83 ms in one
run and 1.93 ms in the next. So a quantized model is never timed alone: LatencyMeter runs it in ROUNDS rounds
interleaved with the float model (float first in even rounds, the candidate first in odd ones), each model for at
least MIN_PASSES passes and ROUND_SECONDS per round, after WARMUP_PASSES. A pass runs every evaluation sample once;
its time per sample is one reading. A round's ratio is the candidate's median reading over the float model's in the
same round, so load that slows both cancels out. The candidate's latency is the float model's reference figure
(measured once per study: the minimum of its per-round medians) times the median of the rounds' ratios, so every
trial of a study is on one scale however loaded the machine was when it ran; its spread is half the range of the
rounds' figures, and the winner rule counts latencies whose spreads overlap as ties. Every model runs with
onnxruntime on the declared device's execution provider, LATENCY_THREADS threads, sequential execution.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import contract

LATENCY_THREADS = 1  # intra-op and inter-op threads: the same for every model and worker, so readings compare
WARMUP_PASSES = 2
ROUNDS = 6  # even: each model goes first equally often
MIN_PASSES = 3  # per model and round
ROUND_SECONDS = 0.1  # per model and round, at least
MAX_PASSES = 50  # per model and round, at most
METHOD = "interleaved with the float model"

Pass = Callable[[], int]  # runs every sample once; the number of samples out
Clock = Callable[[], float]


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


def timed_passes(run_pass: Pass, clock: Clock = time.perf_counter) -> list[float]:
    """One model's share of a round: time per sample (ms) of each pass, MIN_PASSES..MAX_PASSES and ROUND_SECONDS."""
    out: list[float] = []
    started = clock()
    while len(out) < MAX_PASSES and (len(out) < MIN_PASSES or clock() - started < ROUND_SECONDS):
        begin = clock()
        samples = run_pass()
        out.append((clock() - begin) * 1000.0 / max(samples, 1))
    return out


def rounds(passes: list[Pass], clock: Clock = time.perf_counter, count: int = ROUNDS) -> list[list[list[float]]]:
    """Each model warmed up, then `count` rounds in which every model runs its passes in turn (the order reversed
    every other round); per round, each model's readings (in the order given) out."""
    for run_pass in passes:
        for _ in range(WARMUP_PASSES):
            run_pass()
    out = []
    for index in range(count):
        order = list(range(len(passes))) if index % 2 == 0 else list(reversed(range(len(passes))))
        found: dict[int, list[float]] = {}
        for k in order:
            found[k] = timed_passes(passes[k], clock)
        out.append([found[k] for k in range(len(passes))])
    return out


def _half_range(values: list[float]) -> float:
    return (max(values) - min(values)) / 2.0


def reference_record(measured: list[list[list[float]]], provider: str, threads: int) -> dict[str, Any]:
    """The float model's rounds in; its record out: the minimum of its per-round medians (the least loaded round)."""
    medians = [statistics.median(r[0]) for r in measured]
    return {"median_ms": min(medians), "spread_ms": _half_range(medians), "ratio": 1.0,
            "round_medians_ms": medians, "rounds": len(measured), "readings": sum(len(r[0]) for r in measured),
            "method": "the minimum of per-round medians", "provider": provider, "threads": threads}


def compared_record(measured: list[list[list[float]]], reference_ms: float, provider: str,
                    threads: int) -> dict[str, Any]:
    """Rounds of (float readings, candidate readings) and the float model's reference figure in; the candidate's
    record out: median_ms (the figure ranked: reference times the median ratio), spread_ms, the ratio and its
    range over the rounds, and what was measured (each model's least loaded round) for the curious."""
    ratios = [statistics.median(c) / statistics.median(f) for f, c in measured]
    ratio = statistics.median(ratios)
    return {"median_ms": reference_ms * ratio, "spread_ms": reference_ms * _half_range(ratios), "ratio": ratio,
            "ratio_range": [min(ratios), max(ratios)], "reference_ms": reference_ms,
            "measured_ms": min(statistics.median(c) for _, c in measured),
            "float_measured_ms": min(statistics.median(f) for f, _ in measured),
            "rounds": len(measured), "readings": sum(len(c) for _, c in measured),
            "method": METHOD, "provider": provider, "threads": threads}


def spread(record: dict[str, Any] | None) -> float:
    """A latency record's spread in ms (a record of an older run: half its inter-quartile range; none: 0)."""
    if not isinstance(record, dict):
        return 0.0
    if isinstance(record.get("spread_ms"), (int, float)):
        return float(record["spread_ms"])
    if isinstance(record.get("p25_ms"), (int, float)) and isinstance(record.get("p75_ms"), (int, float)):
        return (record["p75_ms"] - record["p25_ms"]) / 2.0
    return 0.0


class LatencyMeter:
    """Measures models on one device over one list of input feeds (the evaluation samples), each interleaved with
    the float model (`reference_model`). Set `reference_ms` (the study's float figure, reference()) before calling."""

    def __init__(self, feeds: list[dict[str, Any]], device: str, custom_ops: str | None = None,
                 reference_model: Path | None = None, clock: Clock = time.perf_counter) -> None:
        if not feeds:
            raise ValueError("latency needs evaluation samples, and the reader gave none")
        self.feeds = feeds
        self.provider = contract.PROVIDERS[device.split(":")[0]][0]
        self.device_id = int(device.split(":")[1]) if ":" in device else None
        self.custom_ops = custom_ops  # Quark's custom-op library, for models that use its ops
        self.reference_model = reference_model
        self.reference_ms: float | None = None
        self.clock = clock
        self._float_pass: Pass | None = None

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

    def _pass(self, model_path: Path) -> Pass:
        session = self.session(model_path)
        if session.get_providers()[0] != self.provider:  # never a silent fallback to another device
            raise RuntimeError(f"onnxruntime ran {model_path.name} on {session.get_providers()[0]}, "
                               f"not {self.provider}")

        def run_pass() -> int:
            for feed in self.feeds:
                session.run(None, feed)
            return len(self.feeds)

        return run_pass

    def _float(self) -> Pass:
        if self.reference_model is None:
            raise ValueError("the latency meter needs the float model to compare with")
        if self._float_pass is None:  # one session for the whole search
            self._float_pass = self._pass(self.reference_model)
        return self._float_pass

    def reference(self) -> dict[str, Any]:
        """The float model alone, ROUNDS rounds: its record (the figure every trial's ratio scales) out."""
        return reference_record(rounds([self._float()], self.clock), self.provider, LATENCY_THREADS)

    def __call__(self, model_path: Path) -> dict[str, Any]:
        """A quantized model in; its record out, measured in rounds interleaved with the float model."""
        if self.reference_ms is None:
            raise ValueError("the float model's reference latency is not set")
        measured = rounds([self._float(), self._pass(model_path)], self.clock)
        return compared_record(measured, self.reference_ms, self.provider, LATENCY_THREADS)
