"""The calibration cache: a trial's Quark config and exclusions in; the activation ranges of an earlier trial with the
same range key handed to Quark through its SaveAndRestore file (calibration skipped), or this trial's ranges kept for
the next, out.

Quark skips calibration when extra_options["SaveAndRestore"] names an existing file and restores the ranges from it
(QUARK-FACTS: 13 s -> 0.3 s per quantization, identical output). The file carries no key, so the cache keeps one file
per range key in <output>/calibration_cache/: Quark's version, the model's digest, the calibration samples' digest and
every part of the config that reaches pre-processing or calibration. Left out of the key are only the parts Quark
applies after the ranges exist: the weights' symmetry, granularity and calibration method, the activations' symmetry
(applied when Q/DQ nodes are inserted) and fast fine-tuning (algorithms adaround / adaquant and their parameters).
Exclusions stay in the key, because pre-processing (fusions, CLE) skips excluded nodes and so can name other tensors.
Each trial works on its own copy of the file, which is hidden from fast fine-tuning (RangesSaved). Workers of one
machine share the folder; a per-key lock makes the first of them calibrate while the others wait for its ranges, then
restore.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import contract
from .histogram_cache import HISTOGRAMS, LAYERWISE_METHOD, LAYERWISE_ONLY_KEYS, collection_key
from .readers import samples_of
from .sensitivity_cache import data_hash, exclusive

FORMAT = 1
# Config keys Quark applies after calibration: they never change the ranges (see the module docstring).
RANGE_NEUTRAL_KEYS = ("algorithms", "adaround_params", "adaquant_params")
# Parameters of a key that Quark applies after calibration too: the activations' QConfig `symmetric` becomes
# extra_options ActivationSymmetric, read only when Q/DQ nodes are inserted (qdq_quantizer.py); the calibrators read
# CalibTensorRangeSymmetric, a key of its own that stays in the range key.
# The weights' symmetry, granularity and calibration method are applied to the weights alone; their data_type and
# scale_type stay in the key: they choose the quant format and, with power-of-two activations, EnableNPUCnn, which
# change the pre-processing and the tensors calibrated (config/maps.py).
RANGE_NEUTRAL_PARAMS = {"activation_params": ("symmetric",),
                        "weight_params": ("symmetric", "quant_granularity", "calibration_method")}
# LayerwisePercentile's own options (LAYERWISE_ONLY_KEYS) are neutral for a config that names no LayerwisePercentile
# anywhere (the A8W8 preset searches PercentileCandidates beside MinMax).
RANGE_STAGES = ("quark_version", "tensors_range")  # what the cached file keeps of Quark's SaveAndRestore file


def samples_digest(reader: Any) -> str:
    """A Quark reader in; the sha256 of its samples out, the reader rewound."""
    return data_hash(samples_of(reader))


def range_part(config: dict[str, Any]) -> dict[str, Any]:
    """A trial's Quark config in; the part the activation ranges depend on out (neutral keys and parameters left
    out)."""
    ranged = {k: v for k, v in config.items() if k not in RANGE_NEUTRAL_KEYS}
    for key, params in RANGE_NEUTRAL_PARAMS.items():
        if isinstance(ranged.get(key), dict):
            ranged[key] = {k: v for k, v in ranged[key].items() if k not in params}
    if LAYERWISE_METHOD not in json.dumps(ranged, default=str):
        ranged = {k: v for k, v in ranged.items() if k not in LAYERWISE_ONLY_KEYS}
    return ranged


def range_identity(model_sha256: dict[str, str], samples: str, exclusions: list[Any], quark_version: str = "") -> (
        dict[str, Any]):
    """What the ranges depend on besides the config (the model, the samples, the exclusions, Quark) in; the part of
    the key that says so out."""
    return {"format": FORMAT, "quark": quark_version, "model": model_sha256, "samples": samples,
            "exclusions": exclusions}


def range_key(model_sha256: dict[str, str], samples: str, config: dict[str, Any], exclusions: list[Any],
              quark_version: str = "") -> str:
    """What the activation ranges depend on in; a hex digest out."""
    value = {"config": range_part(config), **range_identity(model_sha256, samples, exclusions, quark_version)}
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class CalibrationCache:
    """One output folder's range files: `quantize(config, exclusions, run)` runs one Quark quantization with the
    key's ranges restored, or calibrating (from a kept histogram collection where one serves) and keeping them."""

    def __init__(self, folder: Path, model_sha256: dict[str, str], samples: str, quark_version: str = "") -> None:
        self.folder, self.model_sha256, self.samples = folder, model_sha256, samples
        self.quark_version = quark_version  # another Quark may calibrate differently: its ranges are another key
        self.derived = False  # the last quantization calibrated from a kept histogram collection (no samples read)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def quantize(self, config: dict[str, Any], exclusions: list[Any], run: Any) -> bool:
        """Run `run(save_and_restore_path or None)` (one Quark quantization) with this key's ranges restored when they
        are cached, else calibrating under the key's lock (released as soon as Quark has saved the ranges, so another
        worker waits for a calibration, never for a fine-tuning) and keeping them; True when calibration ran."""
        self.derived = False
        if config.get("CalibPassthroughOpTypes") or config.get("SaveAndRestore") or config.get("TensorsRangeFile"):
            # Quark drops pass-through op types from quantization only when it calibrates: a restore would quantize
            # them; a space that names its own ranges file keeps it
            run(None)
            return True
        key = range_key(self.model_sha256, self.samples, config, exclusions, self.quark_version)
        cached, rangeless = self.path(key), self.folder / f"{key}.none"
        if cached.is_file():
            self._run_on_copy(cached, run)
            return False
        if rangeless.is_file():  # Quark saves no ranges for this key (e.g. float16 activations): nothing to wait for
            run(None)
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as held:
            held.enter_context(exclusive(self.folder / f"{key}.lock"))  # another worker calibrating it: wait
            if cached.is_file():
                held.close()
                self._run_on_copy(cached, run)
                return False
            with tempfile.TemporaryDirectory(prefix="qas-ranges-") as work:
                trial_file = Path(work) / "ranges.json"

                def saved() -> None:  # Quark has written the ranges: keep them and let the others restore
                    self._keep(trial_file, cached)
                    held.close()

                collection = self._collection(config, exclusions)
                with RANGES_SAVED.watching(trial_file, saved), HISTOGRAMS.watching(collection):
                    run(trial_file)
                    self.derived = HISTOGRAMS.reused
                if not cached.is_file() and not self._keep(trial_file, cached):
                    rangeless.touch()
        return True

    def _collection(self, config: dict[str, Any], exclusions: list[Any]) -> Path | None:
        """The file of the histogram collection this config's ranges are computed from, or None when none serves."""
        key = collection_key(range_part(config), range_identity(self.model_sha256, self.samples, exclusions,
                                                                self.quark_version))
        return None if key is None else self.folder / f"{key}.histograms"

    @staticmethod
    def _run_on_copy(cached: Path, run: Any) -> None:
        with tempfile.TemporaryDirectory(prefix="qas-ranges-") as work:
            trial_file = Path(work) / "ranges.json"
            shutil.copyfile(cached, trial_file)
            with RANGES_SAVED.watching(trial_file):
                run(trial_file)

    @staticmethod
    def _keep(trial_file: Path, cached: Path) -> bool:
        """The ranges Quark saved into the trial's file, written atomically as the key's file; False when Quark
        saved none (e.g. a float16 activation type that is never calibrated)."""
        try:
            saved = json.loads(trial_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        kept = {stage: saved[stage] for stage in RANGE_STAGES if stage in saved}
        if "tensors_range" not in kept:
            return False
        partial = cached.with_name(f".{cached.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(partial, cached)
        return True


class RangesSaved:
    """Two hooks in Quark for the cache's SaveAndRestore file (install() wraps the functions once per process):
    - a call back when Quark has saved the calibrated ranges into the watched file (its quantize_static calls
      save_and_restore_func right after calibrating, before it quantizes and fine-tunes), so the key's lock is
      released then;
    - the file hidden from the post-quantization algorithms: fast fine-tuning would otherwise write the whole model
      next to it before each layer it trains (its resume point), I/O a search without the cache never does.
    Without install() (Quark quantizing in this process, not the quantizer's child) neither happens: the lock is held
    to the end of the quantization and fine-tuning writes its resume points; slower, never wrong."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.callback: Any = None
        self.installed = False

    def install(self) -> None:
        import quark.onnx.postprocess.postproc as quark_postproc
        import quark.onnx.quantization.quantize as quark_quantize

        if self.installed:
            return
        save = quark_quantize.save_and_restore_func
        post = quark_postproc.apply_post_quant_algorithms

        def watched_save(*args: Any, **kwargs: Any) -> Any:
            result = save(*args, **kwargs)
            path = kwargs.get("save_and_restore", args[0] if args else None)
            command = kwargs.get("command_type", args[1] if len(args) > 1 else None)
            stage = kwargs.get("stage_name", args[3] if len(args) > 3 else "tensors_range")
            if command == "save" and stage == "tensors_range" and self.callback is not None and path == self.path:
                callback, self.callback = self.callback, None
                callback()
            return result

        def without_our_file(*args: Any, **kwargs: Any) -> Any:
            options = kwargs.get("extra_options")
            if isinstance(options, dict) and self.path is not None and options.get("SaveAndRestore") == self.path:
                kwargs["extra_options"] = {k: v for k, v in options.items() if k != "SaveAndRestore"}
            return post(*args, **kwargs)

        quark_quantize.save_and_restore_func = watched_save
        quark_postproc.apply_post_quant_algorithms = without_our_file
        self.installed = True

    @contextlib.contextmanager
    def watching(self, path: Path, callback: Any = None) -> Iterator[None]:
        self.path, self.callback = str(path), callback
        try:
            yield
        finally:
            self.path, self.callback = None, None


RANGES_SAVED = RangesSaved()  # the process's one watch: Quark's function is wrapped once


def cache_folder(here: Path) -> Path:
    """The output folder in; its calibration cache folder out."""
    return here / contract.CALIBRATION_CACHE_DIR
