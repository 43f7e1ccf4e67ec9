"""The calibration cache: a trial's Quark config and exclusions in; the activation ranges of an earlier trial with the
same range key handed to Quark through its SaveAndRestore file (calibration skipped), or this trial's ranges kept for
the next, out.

Quark skips calibration when extra_options["SaveAndRestore"] names an existing file and restores the ranges from it
(QUARK-FACTS: 13 s -> 0.3 s per quantization, identical output). The file carries no key, so the cache keeps one file
per range key in <output>/calibration_cache/: Quark's version, the model's digest, the calibration samples' digest and
every part of the config that reaches pre-processing or calibration. Left out of the key are only the parts Quark
applies after the ranges exist: the weights' own settings (weight_params) and fast fine-tuning (algorithms adaround /
adaquant and their parameters). Exclusions stay in the key, because pre-processing (fusions, CLE) skips excluded
nodes and so can name other tensors. Each trial works on its own copy of the file, since fast fine-tuning stores its
progress in it.
Workers of one machine share the folder; a per-key lock makes the first of them calibrate while the others wait and
then restore.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from . import contract
from .readers import samples_of
from .sensitivity_cache import data_hash, exclusive

FORMAT = 1
# Config keys Quark applies after calibration: they never change the ranges (see the module docstring).
RANGE_NEUTRAL_KEYS = ("weight_params", "algorithms", "adaround_params", "adaquant_params")
RANGE_STAGES = ("quark_version", "tensors_range")  # what the cached file keeps of Quark's SaveAndRestore file


def samples_digest(reader: Any) -> str:
    """A Quark reader in; the sha256 of its samples out, the reader rewound."""
    return data_hash(samples_of(reader))


def range_key(model_sha256: dict[str, str], samples: str, config: dict[str, Any], exclusions: list[Any],
              quark_version: str = "") -> str:
    """What the activation ranges depend on in; a hex digest out."""
    ranged = {k: v for k, v in config.items() if k not in RANGE_NEUTRAL_KEYS}
    value = {"format": FORMAT, "quark": quark_version, "model": model_sha256, "samples": samples, "config": ranged,
             "exclusions": exclusions}
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class CalibrationCache:
    """One output folder's range files: `use(config, exclusions)` gives the SaveAndRestore path for one quantization
    and `keep(...)` stores what Quark calibrated into it."""

    def __init__(self, folder: Path, model_sha256: dict[str, str], samples: str, quark_version: str = "") -> None:
        self.folder, self.model_sha256, self.samples = folder, model_sha256, samples
        self.quark_version = quark_version  # another Quark may calibrate differently: its ranges are another key

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def quantize(self, config: dict[str, Any], exclusions: list[Any], run: Any) -> bool:
        """Run `run(save_and_restore_path)` (one Quark quantization) with this key's ranges restored when they are
        cached, else calibrating under the key's lock and keeping the ranges; True when calibration ran."""
        key = range_key(self.model_sha256, self.samples, config, exclusions, self.quark_version)
        cached = self.path(key)
        if cached.is_file():
            self._run_on_copy(cached, run)
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        with exclusive(self.folder / f"{key}.lock"):  # another worker calibrating this key: wait, then restore
            if cached.is_file():
                self._run_on_copy(cached, run)
                return False
            with tempfile.TemporaryDirectory(prefix="qas-ranges-") as work:
                trial_file = Path(work) / "ranges.json"
                run(trial_file)
                self._keep(trial_file, cached)
        return True

    @staticmethod
    def _run_on_copy(cached: Path, run: Any) -> None:
        with tempfile.TemporaryDirectory(prefix="qas-ranges-") as work:
            trial_file = Path(work) / "ranges.json"
            shutil.copyfile(cached, trial_file)
            run(trial_file)

    @staticmethod
    def _keep(trial_file: Path, cached: Path) -> None:
        """The ranges Quark saved into the trial's file, written atomically as the key's file (nothing when Quark
        saved none, e.g. a float16 activation type that is never calibrated)."""
        try:
            saved = json.loads(trial_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        kept = {stage: saved[stage] for stage in RANGE_STAGES if stage in saved}
        if "tensors_range" not in kept:
            return
        partial = cached.with_name(f".{cached.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(partial, cached)


def cache_folder(here: Path) -> Path:
    """The output folder in; its calibration cache folder out."""
    return here / contract.CALIBRATION_CACHE_DIR
