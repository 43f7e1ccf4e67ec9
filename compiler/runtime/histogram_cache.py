"""One histogram collection for every Percentile value and for LayerwisePercentile: a calibration's collection key in;
Quark's calibrator given the histograms an earlier calibration collected (no pass over the samples), or its own
collection kept for the next, out.

Quark's PercentileCalibrater collects one histogram per tensor (OverridedHistogramCollector.histogram_dict), then
computes the ranges from it for its `percentile` (compute_percentile, which reads the histograms and changes nothing).
Its LayerWisePercentileCalibrater (with LWPUseHistogram, Quark's default) collects the same histograms through the
same method (super().collect_data with layer_wise=False: the same bins and symmetry options, read from the same
extra options with the same defaults) and then picks, per tensor, the best of its PercentileCandidates from them.
The histograms depend on everything in the range key except the method's own values (Percentile; PercentileCandidates,
LWPMetric), so ranges computed from a kept collection are exactly a fresh calibration's (QUARK-FACTS;
tests/test_e2e_calibration_cache.py proves it on the real Quark, both ways between the two methods). Not served:
LayerwisePercentile on raw outputs (LWPUseHistogram false), Entropy and Distribution (other bins), MinMax (its own,
cheap pass).

The collection is kept as a pickle of that dict in the calibration cache's folder. The folder is the output folder's,
which also holds the script that runs: loading it trusts nothing the search did not already trust. Workers of one
machine collect under a per-collection lock: one that needs a collection another is making waits, then reuses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .console import warn
from .sensitivity_cache import exclusive

PERCENTILE_METHOD, LAYERWISE_METHOD = "Percentile", "LayerwisePercentile"
# Options only Quark's LayerwisePercentile calibrator reads (calibrators.create_calibrator_float_scale)
LAYERWISE_ONLY_KEYS = ("PercentileCandidates", "LWPMetric", "LWPUseHistogram")
# config keys (Quark extra options) read after the histograms exist, or only to choose them (LWPUseHistogram: served
# only when true), so not part of a collection's key
VALUE_KEYS = ("Percentile", *LAYERWISE_ONLY_KEYS)


def collection_key(range_part: dict[str, Any], range_identity: dict[str, Any]) -> str | None:
    """A trial's range-relevant config and what else its range key hashes (model, samples, exclusions, Quark) in;
    the key of the histogram collection its ranges are computed from out, or None when its method has none."""
    activation = range_part.get("activation_params") or {}
    method = activation.get("calibration_method")
    histograms = method == PERCENTILE_METHOD or (method == LAYERWISE_METHOD
                                                  and range_part.get("LWPUseHistogram", True) is True)
    if not histograms or range_part.get("specific_layer_config") or range_part.get("layer_type_config"):
        return None  # a per-layer config may calibrate some tensors otherwise: not served
    import numpy

    collected = {k: v for k, v in range_part.items() if k not in VALUE_KEYS}
    collected["activation_params"] = {**activation, "calibration_method": PERCENTILE_METHOD}  # one collection
    # the pickled histograms are numpy arrays: another numpy may not read them, so it is another collection
    value = {"collection": collected, "numpy": numpy.__version__, **range_identity}
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def collection_lock(path: Path) -> Path:
    """A kept collection's path in; the lock file its collectors hold while they collect or read it out."""
    return path.with_name(f".{path.name}.lock")


class HistogramCollections:
    """Wraps Quark's PercentileCalibrater.collect_data (install(), once per process) so that, while `watching(path)`,
    it loads the histograms kept at path instead of collecting them, or keeps what it collected there."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.reused = False  # the watched calibration computed its ranges from a kept collection
        self.installed = False

    def install(self) -> None:
        from quark.onnx.calibration import calibrators

        if self.installed:
            return
        percentile = calibrators.PercentileCalibrater
        layerwise = calibrators.LayerWisePercentileCalibrater
        collect = percentile.collect_data

        def collect_or_reuse(calibrator: Any, data_reader: Any, *args: Any, **kwargs: Any) -> Any:
            # LayerwisePercentile (a subclass) calls this through super(): served with its histograms
            # (layer_wise=False), never with raw outputs kept (layer_wise=True)
            plain = type(calibrator) is percentile and not args and not kwargs
            histograms = type(calibrator) is layerwise and not args and kwargs == {"layer_wise": False}
            if self.path is None or not (plain or histograms):
                return collect(calibrator, data_reader, *args, **kwargs)
            with contextlib.ExitStack() as held:
                try:  # a second worker waits for this collection, then reuses it
                    held.enter_context(exclusive(collection_lock(self.path)))
                except OSError as error:  # nothing may escape into Quark (see _reuse): collect, keep nothing
                    warn(f"qas: the histogram collection's lock could not be taken ({error}); collecting without it")
                    return collect(calibrator, data_reader, *args, **kwargs)
                if self.path.is_file() and self._reuse(calibrator):
                    return None
                result = collect(calibrator, data_reader, *args, **kwargs)
                self._keep(calibrator.collector.histogram_dict)
                return result

        percentile.collect_data = collect_or_reuse
        self.installed = True

    def _reuse(self, calibrator: Any) -> bool:
        """The calibrator's collector built as its own collection would build it, given the kept histograms; False
        (the file removed, so the caller collects afresh) when they cannot be read. Nothing may escape into Quark:
        its run_calibration answers any error by calibrating with MinMax instead, ranges the cache would then keep
        under a Percentile key."""
        from quark.onnx.calibration.collectors import OverridedHistogramCollector

        try:
            with open(self.path, "rb") as kept:
                histograms = pickle.load(kept)
            if not isinstance(histograms, dict) or not histograms:
                raise ValueError("not a histogram collection")
        except Exception as error:  # noqa: BLE001 - a torn or foreign file (any unpickling error): collect again
            warn(f"qas: the kept histogram collection {self.path.name} could not be read ({type(error).__name__}: "
                 f"{error}); collecting it again")
            self.path.unlink(missing_ok=True)
            return False
        collector = OverridedHistogramCollector(
            method=calibrator.method, symmetric=calibrator.symmetric, num_bins=calibrator.num_bins,
            num_quantized_bins=calibrator.num_quantized_bins, percentile=calibrator.percentile,
            scenario=calibrator.scenario, optimize_mem=calibrator.optimize_mem, worker_num=calibrator.worker_num)
        collector.histogram_dict = histograms
        calibrator.collector = collector
        self.reused = True
        return True

    def _keep(self, histograms: dict[str, Any]) -> None:
        """The collection written atomically at the watched path; best effort: a failure (a full disk) costs the next
        Percentile value a collection of its own, never this calibration."""
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        try:
            with open(partial, "wb") as out:
                pickle.dump(histograms, out, protocol=pickle.HIGHEST_PROTOCOL)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, self.path)
        except Exception as error:  # noqa: BLE001 - nothing may escape into Quark (see _reuse)
            warn(f"qas: the histogram collection could not be kept ({type(error).__name__}: {error})")
        finally:
            partial.unlink(missing_ok=True)

    @contextlib.contextmanager
    def watching(self, path: Path | None) -> Iterator[None]:
        """Within the block, a Percentile or LayerwisePercentile calibration on histograms reuses or keeps the
        collection at path (None: none)."""
        self.path, self.reused = path, False
        try:
            yield
        finally:
            self.path = None


HISTOGRAMS = HistogramCollections()  # the process's one watch: Quark's method is wrapped once
