"""The calibration cache's key and files, with a fake quantization in place of Quark's (the real one:
test_e2e_calibration_cache.py): what is left out of the key, what is kept of Quark's SaveAndRestore file, and that a
cached key's trials each get their own copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler.runtime.calibration_cache import CalibrationCache, range_identity, range_key, range_part
from compiler.runtime.histogram_cache import collection_key

MODEL = {"m.onnx": "a" * 64}
BASE = {"activation": "Int8Spec", "activation_params": {"calibration_method": "Percentile", "symmetric": True},
        "weight": "Int8Spec", "weight_params": {"symmetric": True}, "cle_algo": None}


def test_the_key_leaves_out_only_what_quark_applies_after_the_ranges_exist() -> None:
    key = range_key(MODEL, "data", BASE, [])
    neutral = dict(BASE, weight_params={"symmetric": False, "quant_granularity": "Channel",
                                        "calibration_method": "MinMSE"}, algorithms="adaround",
                   adaround_params={"num_iterations": 10},
                   activation_params={"calibration_method": "Percentile", "symmetric": False})
    assert range_key(MODEL, "data", neutral, []) == key
    assert BASE["activation_params"]["symmetric"] is True  # left as it was
    for changed in (dict(BASE, activation_params={"calibration_method": "MinMax", "symmetric": True}),
                    dict(BASE, activation_params={"calibration_method": "Percentile", "symmetric": True,
                                                  "scale_type": "PowerOf2"}),
                    dict(BASE, cle_algo="cle"), dict(BASE, weight="Int16Spec"),
                    # the quant format and NPU pre-processing follow the weights' data and scale types
                    dict(BASE, weight_params={"symmetric": True, "data_type": "Int16"}),
                    dict(BASE, weight_params={"symmetric": True, "scale_type": "PowerOf2"})):
        assert range_key(MODEL, "data", changed, []) != key, changed
    assert range_key(MODEL, "data", BASE, ["conv1"]) != key  # pre-processing skips excluded nodes
    # LayerwisePercentile's own options change only its ranges
    assert range_key(MODEL, "data", dict(BASE, PercentileCandidates=[99.0, 99.9]), []) == key
    layerwise = dict(BASE, activation_params={"calibration_method": "LayerwisePercentile", "symmetric": True})
    assert (range_key(MODEL, "data", dict(layerwise, PercentileCandidates=[99.0, 99.9]), [])
            != range_key(MODEL, "data", layerwise, []))
    assert range_key(MODEL, "other data", BASE, []) != key
    assert range_key({"m.onnx": "b" * 64}, "data", BASE, []) != key
    assert range_key(MODEL, "data", BASE, [], "0.14") != range_key(MODEL, "data", BASE, [], "0.13")


class FakeQuark:
    """Writes a SaveAndRestore file as Quark does: ranges when it calibrates (the file is absent), fine-tuning
    progress always; records whether each call found ranges to restore."""

    def __init__(self) -> None:
        self.restored: list[bool] = []

    def __call__(self, path: Path) -> None:
        found = json.loads(path.read_text()) if path.exists() else {}
        self.restored.append("tensors_range" in found)
        found.setdefault("quark_version", "0.13")
        found.setdefault("tensors_range", {"x": [[-1.0], [1.0]]})
        found["model_to_finetune"] = str(path.with_suffix(".onnx"))  # per trial: must never reach the cache
        path.write_text(json.dumps(found))


def test_one_calibration_per_key_and_every_trial_restores_from_its_own_copy(tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "cache", MODEL, "data")
    quark = FakeQuark()
    assert cache.quantize(BASE, [], quark) is True  # calibrated
    assert cache.quantize(dict(BASE, weight_params={"symmetric": False}), [], quark) is False  # restored
    assert cache.quantize(BASE, ["conv1"], quark) is True  # another key
    assert quark.restored == [False, True, False]
    files = sorted((tmp_path / "cache").iterdir())
    assert [f.suffix for f in files] == [".json", ".json"]  # no lock or partial file left behind
    for file in files:
        assert set(json.loads(file.read_text())) == {"quark_version", "tensors_range"}


def test_a_key_quark_saves_no_ranges_for_is_marked_and_run_without_the_lock(tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "cache", MODEL, "data")
    paths: list[Any] = []

    def float16(path: Any) -> None:  # Quark skips calibration for float16 activations: nothing saved
        paths.append(path)

    assert cache.quantize(BASE, [], float16) is True
    assert cache.quantize(BASE, [], float16) is True
    assert paths[0] is not None and paths[1] is None  # the second knew: no SaveAndRestore file, no lock
    assert [f.suffix for f in (tmp_path / "cache").iterdir()] == [".none"]


def test_pass_through_op_types_are_never_restored(tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "cache", MODEL, "data")
    paths: list[Any] = []
    config = dict(BASE, CalibPassthroughOpTypes=["GlobalAveragePool"])
    assert cache.quantize(config, [], paths.append) is True
    assert cache.quantize(config, [], paths.append) is True
    assert paths == [None, None]  # Quark applies them only when it calibrates


def test_the_keys_lock_is_released_once_quark_has_saved_the_ranges(tmp_path: Path) -> None:
    from compiler.runtime.calibration_cache import RANGES_SAVED

    cache = CalibrationCache(tmp_path / "cache", MODEL, "data")
    seen: dict[str, Any] = {}

    def calibrate_then_finetune(path: Path) -> None:
        path.write_text(json.dumps({"quark_version": "0.13", "tensors_range": {"x": [[-1.0], [1.0]]}}))
        RANGES_SAVED.callback()  # what the wrapped save_and_restore_func does right after Quark saves
        seen["locks while fine-tuning"] = sorted(p.name for p in (tmp_path / "cache").glob("*.lock"))
        seen["cached while fine-tuning"] = sorted(p.suffix for p in (tmp_path / "cache").iterdir())

    assert cache.quantize(BASE, [], calibrate_then_finetune) is True
    assert seen == {"locks while fine-tuning": [], "cached while fine-tuning": [".json"]}
    assert RANGES_SAVED.callback is None


def test_one_histogram_collection_serves_every_percentile_value_layerwise_percentile_and_nothing_else() -> None:
    identity = range_identity(MODEL, "data", [])

    def key(config: dict[str, Any]) -> str | None:
        return collection_key(range_part(config), identity)

    assert key(dict(BASE, Percentile=99.9)) == key(dict(BASE, Percentile=99.999)) == key(BASE) is not None
    assert key(dict(BASE, NumBins=512)) != key(BASE)
    assert key(dict(BASE, CalibTensorRangeSymmetric=False)) != key(BASE)  # the absolute-value histogram or not
    assert collection_key(range_part(BASE), range_identity(MODEL, "other data", [])) != key(BASE)
    for other in ("MinMax", "Entropy", "Distribution"):
        assert key(dict(BASE, activation_params={"calibration_method": other})) is None
    layerwise = dict(BASE, activation_params={"calibration_method": "LayerwisePercentile"})
    assert key(layerwise) == key(dict(layerwise, PercentileCandidates=[99.9, 99.99], LWPMetric="mse")) == key(BASE)
    assert key(dict(layerwise, LWPUseHistogram=True)) == key(BASE)
    assert key(dict(layerwise, LWPUseHistogram=False)) is None  # the raw outputs, not the histograms
    assert key(dict(layerwise, NumBins=512)) == key(dict(BASE, NumBins=512)) != key(BASE)
    assert key(dict(BASE, specific_layer_config={"conv1": "Int16Spec"})) is None
