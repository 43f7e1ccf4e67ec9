"""search.calibration_cache with the real amd-quark on zoo models: the same seeded search with the cache on and off
gives every trial the same configuration and exactly the same value, while the cached search calibrates once per
range key (one file each in calibration_cache/) and restores the ranges in every other trial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler.runtime.calibration_cache import range_part as ranged

from .conftest import needs_quark, qas
from .zoo import build

pytestmark = [pytest.mark.e2e, needs_quark]

# A calibration space beside the weights' settings and fine-tuning, so range keys repeat across trials: the
# calibration methods of one family, activation symmetry, and what the cache leaves out of the key (weight_params,
# fine-tuning).
# A third space searches Percentile's value: one histogram collection serves the three values.
SPACES = {
    "A8W8_SEARCH": "override: {activation_params: {calibration_method: [MinMax, Percentile]}, "
                   "weight_params: {symmetric: [true, false]}}",
    "XINT8_SEARCH": "",
    "PERCENTILES": "override: {activation_params: {calibration_method: [Percentile]}, "
                   "Percentile: [99.9, 99.99, 99.999]}",
    "HISTOGRAM_METHODS": "override: {activation_params: {calibration_method: [Percentile, LayerwisePercentile]}, "
                         "Percentile: [99.9, 99.99]}",
}
PRESETS = {"PERCENTILES": "A8W8_SEARCH", "HISTOGRAM_METHODS": "A8W8_SEARCH"}  # a space's preset when not its name
HISTOGRAM_METHODS = ("Percentile", "LayerwisePercentile")  # one collection serves both (histogram_cache.py)


def run_search(model: str, space: str, folder: Path, cache: bool) -> list[dict[str, Any]]:
    """One seeded 6-trial search of a zoo model; its quantized trials (from `qas report --format json`) out."""
    zm = build(model, folder)
    preset = PRESETS.get(space, space)
    parts = [SPACES[space]] + ([] if cache else ["calibration_cache: false"])
    extra = "search: {" + ", ".join(p for p in parts if p) + "}\n"
    zm.write_spec(folder, preset=preset, n_trials=6, extra_yaml=extra)
    done = qas("run", "spec.yaml", "--yes", cwd=folder, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = qas("report", "autosearch_output", "--format", "json", cwd=folder)
    assert report.returncode == 0, report.stderr[-2000:]
    trials = json.loads(report.stdout)["all_trials"]
    assert all(t["state"] == "COMPLETE" for t in trials), trials
    return [t for t in trials if t["reused_from"] is None]


def range_part(config: dict[str, Any]) -> str:
    return json.dumps(ranged(config), sort_keys=True)


def collection_part(config: dict[str, Any]) -> str:
    """What a histogram collection depends on: the range part without the methods' own values, either method."""
    part = {k: v for k, v in ranged(config).items()
            if k not in ("Percentile", "PercentileCandidates", "LWPMetric", "LWPUseHistogram")}
    part["activation_params"] = {**part["activation_params"], "calibration_method": "one collection"}
    return json.dumps(part, sort_keys=True)


@pytest.mark.parametrize("model, space", [("resnet_bn", "A8W8_SEARCH"), ("detector", "XINT8_SEARCH"),
                                          ("resnet_bn", "PERCENTILES"), ("detector", "HISTOGRAM_METHODS")])
def test_cached_ranges_give_every_trial_the_value_of_a_fresh_calibration(tmp_path: Path, model: str,
                                                                          space: str) -> None:
    cached = run_search(model, space, tmp_path / "on", cache=True)
    fresh = run_search(model, space, tmp_path / "off", cache=False)
    assert [(t["number"], t["config"]) for t in cached] == [(t["number"], t["config"]) for t in fresh]
    assert [t["value"] for t in cached] == [t["value"] for t in fresh]  # exactly, not approximately

    keys = {range_part(t["config"]) for t in cached}
    assert len(keys) < len(cached), "the space gave no trial a range key seen before; the test proves nothing"
    calibrated = [t for t in cached if not t["steps"]["calibration_cached"]]
    files = list((tmp_path / "on/autosearch_output/calibration_cache").glob("*.json"))
    assert len(calibrated) == len(keys) == len(files)
    restored = [t for t in cached if t["steps"]["calibration_cached"]]
    assert all(t["steps"]["calibrate_s"] == 0.0 for t in restored)
    if space == "A8W8_SEARCH":  # the activations' symmetry is range-neutral: a restore across it is proven exact here
        symmetry = {range_part(t["config"]): t["config"]["activation_params"]["symmetric"] for t in calibrated}
        assert any(t["config"]["activation_params"]["symmetric"] != symmetry[range_part(t["config"])]
                   for t in restored), "no trial restored ranges across activation symmetry"
    assert all(t["steps"]["calibrate_s"] > 0.0 for t in calibrated)
    derived = [t for t in calibrated if t["steps"]["calibration_derived"]]
    by_histograms = [t for t in calibrated if t["config"].get("LWPUseHistogram", True)
                     and t["config"]["activation_params"]["calibration_method"] in HISTOGRAM_METHODS]
    collections = {collection_part(t["config"]) for t in by_histograms}  # one pass over the samples each
    assert len(derived) == len(by_histograms) - len(collections)
    assert len(list((tmp_path / "on/autosearch_output/calibration_cache").glob("*.histograms"))) == len(collections)
    if space in ("PERCENTILES", "HISTOGRAM_METHODS"):
        assert derived, "no trial computed its ranges from a kept collection; the test proves nothing"
    if space == "HISTOGRAM_METHODS":  # both methods on one collection: one of them derived from the other's
        shared: dict[str, set[str]] = {}
        for t in by_histograms:
            method = t["config"]["activation_params"]["calibration_method"]
            shared.setdefault(collection_part(t["config"]), set()).add(method)
        assert set(HISTOGRAM_METHODS) in shared.values(), f"no collection served both methods: {shared}"
    for t in cached + fresh:  # fast fine-tuning is timed apart, and only where it ran
        tuned = t["config"].get("algorithms") in ("adaround", "adaquant")
        assert (t["steps"]["finetune_s"] > 0.0) == tuned, t
    assert not (tmp_path / "off/autosearch_output/calibration_cache").exists()
    assert all(t["steps"]["calibrate_s"] > 0.0 for t in fresh)


def test_two_workers_on_one_machine_calibrate_each_range_key_once(tmp_path: Path) -> None:
    zm = build("resnet_bn", tmp_path)
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=6, extra_yaml="search: {" + SPACES["A8W8_SEARCH"] + "}\n")
    done = qas("run", "spec.yaml", "--yes", "--workers", "2", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path).stdout)
    quantized = [t for t in report["all_trials"] if t["state"] == "COMPLETE" and t["reused_from"] is None]
    assert len({t["worker"].split("@")[0] for t in quantized}) == 2, "one worker did every trial"
    keys = {range_part(t["config"]) for t in quantized}
    calibrated = [t for t in quantized if not t["steps"]["calibration_cached"]]
    assert len(calibrated) == len(keys) == report["cost"]["calibrations"]
    kept = [p for p in (tmp_path / "autosearch_output/calibration_cache").iterdir() if p.suffix != ".histograms"]
    assert len(kept) == len(keys)  # no lock left


def test_the_ranges_are_kept_as_soon_as_quark_saves_them_before_it_quantizes(tmp_path: Path, monkeypatch) -> None:
    """The real Quark calls the wrapped save_and_restore_func right after calibrating: the key's file exists (and its
    lock is free) before the quantized model is written."""
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime import calibration_cache
    from compiler.runtime.calibration_cache import RANGES_SAVED, CalibrationCache
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names

    zm = build("resnet_bn", tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    cache = CalibrationCache(tmp_path / "cache", {"m": "x"}, "d")
    output = tmp_path / "q.onnx"
    kept_before_model: list[bool] = []
    keep = calibration_cache.CalibrationCache._keep

    def watched_keep(trial_file: Path, cached: Path) -> bool:
        kept_before_model.append(not output.exists())
        return keep(trial_file, cached)

    monkeypatch.setattr(calibration_cache.CalibrationCache, "_keep", staticmethod(watched_keep))
    RANGES_SAVED.install()
    steps = QuarkQuantizer(zm.model, reader, [], cache=cache).quantize(
        {"activation": "Int8Spec", "weight": "Int8Spec"}, output, [])
    assert steps["calibration_cached"] is False and output.is_file()
    assert kept_before_model == [True]  # kept from the hook, not after the quantization
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".json"]


ADAROUND = {"activation": "Int8Spec", "weight": "Int8Spec", "algorithms": "adaround",
            "adaround_params": {"num_iterations": 2, "learning_rate": 0.1, "optim_device": "cpu", "infer_device": "cpu",
                                "data_size": 4, "batch_size": 2, "early_stop": True}}


def test_fine_tuning_never_sees_the_caches_file(tmp_path: Path, monkeypatch) -> None:
    """With the file hidden from the post-quantization algorithms, AdaRound writes no resume point (a whole model per
    layer) beside it, restoring or calibrating, as without the cache."""
    import quark.onnx.algorithm.finetuning.fast_finetune as fast_finetune
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime.calibration_cache import RANGES_SAVED, CalibrationCache
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names

    resume_points: list[int] = []
    original = fast_finetune.save_model_layers_to_finetune
    monkeypatch.setattr(fast_finetune, "save_model_layers_to_finetune",
                        lambda *a, **k: resume_points.append(1) or original(*a, **k))
    zm = build("resnet_bn", tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    quantizer = QuarkQuantizer(zm.model, reader, [], cache=CalibrationCache(tmp_path / "cache", {"m": "x"}, "d"))
    from compiler.runtime.step_clock import CLOCK

    CLOCK.install()  # as the quantizer's child process does: fine-tuning timed, the file hidden from it
    RANGES_SAVED.install()
    first = quantizer.quantize(ADAROUND, tmp_path / "a.onnx", [])
    second = quantizer.quantize(ADAROUND, tmp_path / "b.onnx", [])
    assert first["calibration_cached"] is False and second["calibration_cached"] is True
    assert first["finetune_s"] > 0 and second["finetune_s"] > 0
    assert resume_points == []


SYMMETRY_CASES = [("Int8Spec", "MinMax"), ("Int8Spec", "Percentile"), ("Int8Spec", "LayerwisePercentile"),
                  ("Int16Spec", "MinMax"), ("XInt8Spec", "MinMSE")]


@pytest.mark.parametrize("family, method", SYMMETRY_CASES)
def test_ranges_restored_across_activation_symmetry_give_the_freshly_calibrated_model(tmp_path: Path, family: str,
                                                                                      method: str) -> None:
    """The activations' symmetry is left out of the range key: ranges calibrated with symmetric true and restored into
    a symmetric false quantization give exactly the model a fresh symmetric false calibration gives."""
    import onnx
    from onnx import numpy_helper
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime.calibration_cache import RANGES_SAVED, CalibrationCache
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names

    def config(symmetric: bool) -> dict[str, Any]:
        return {"activation": family, "activation_params": {"symmetric": symmetric, "calibration_method": method},
                "weight": "Int8Spec"}

    def initializers(path: Path) -> dict[str, Any]:
        return {t.name: numpy_helper.to_array(t).tolist() for t in onnx.load(str(path)).graph.initializer}

    zm = build("resnet_bn", tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    RANGES_SAVED.install()
    shared = QuarkQuantizer(zm.model, reader, [], cache=CalibrationCache(tmp_path / "shared", {"m": "x"}, "d"))
    fresh = QuarkQuantizer(zm.model, reader, [], cache=CalibrationCache(tmp_path / "fresh", {"m": "x"}, "d"))
    assert shared.quantize(config(True), tmp_path / "symmetric.onnx", [])["calibration_cached"] is False
    assert shared.quantize(config(False), tmp_path / "restored.onnx", [])["calibration_cached"] is True
    assert fresh.quantize(config(False), tmp_path / "fresh.onnx", [])["calibration_cached"] is False
    assert initializers(tmp_path / "restored.onnx") == initializers(tmp_path / "fresh.onnx")
    # the symmetry reaches the quantization (zero points differ), except in XInt8's power-of-two family, which
    # quantizes symmetrically whatever the flag says
    differs = initializers(tmp_path / "symmetric.onnx") != initializers(tmp_path / "fresh.onnx")
    assert differs == (family != "XInt8Spec")


@pytest.mark.parametrize("model, range_symmetric", [("resnet_bn", False), ("detector", True)])
def test_percentile_ranges_derived_from_a_kept_collection_equal_a_fresh_calibration(tmp_path: Path, model: str,
                                                                                    range_symmetric: bool) -> None:
    """One histogram collection serves every Percentile value: the ranges and the model of a 99.99 quantization
    computed from the collection a 99.9 quantization kept equal a fresh 99.99 calibration's, exactly (signed
    histograms, and the absolute-value ones of CalibTensorRangeSymmetric)."""
    import onnx
    from onnx import numpy_helper
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime.calibration_cache import RANGES_SAVED, CalibrationCache
    from compiler.runtime.histogram_cache import HISTOGRAMS
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names

    def config(percentile: float) -> dict[str, Any]:
        return {"activation": "Int8Spec", "activation_params": {"calibration_method": "Percentile"},
                "weight": "Int8Spec", "Percentile": percentile, "CalibTensorRangeSymmetric": range_symmetric}

    def initializers(path: Path) -> dict[str, Any]:
        return {t.name: numpy_helper.to_array(t).tolist() for t in onnx.load(str(path)).graph.initializer}

    def ranges(folder: Path) -> list[Any]:
        return [json.loads(p.read_text())["tensors_range"] for p in sorted(folder.glob("*.json"))]

    zm = build(model, tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    from compiler.runtime.step_clock import CLOCK

    CLOCK.install()
    RANGES_SAVED.install()
    HISTOGRAMS.install()
    shared = CalibrationCache(tmp_path / "shared", {"m": "x"}, "d")
    fresh = CalibrationCache(tmp_path / "fresh", {"m": "x"}, "d")
    first = QuarkQuantizer(zm.model, reader, [], cache=shared).quantize(config(99.9), tmp_path / "p999.onnx", [])
    assert (first["calibration_cached"], first["calibration_derived"]) == (False, False)
    assert len(list((tmp_path / "shared").glob("*.histograms"))) == 1
    derived = QuarkQuantizer(zm.model, reader, [], cache=shared).quantize(config(99.99), tmp_path / "derived.onnx", [])
    assert (derived["calibration_cached"], derived["calibration_derived"]) == (False, True)
    alone = QuarkQuantizer(zm.model, reader, [], cache=fresh).quantize(config(99.99), tmp_path / "fresh.onnx", [])
    assert alone["calibration_derived"] is False
    [fresh_ranges] = ranges(tmp_path / "fresh")
    assert fresh_ranges in ranges(tmp_path / "shared")  # the derived quantization kept exactly these ranges
    assert initializers(tmp_path / "derived.onnx") == initializers(tmp_path / "fresh.onnx")
    assert initializers(tmp_path / "p999.onnx") != initializers(tmp_path / "fresh.onnx")  # the percentile mattered

    # a torn collection is collected again, never answered by Quark's MinMax fallback
    [kept] = (tmp_path / "shared").glob("*.histograms")
    kept.write_bytes(kept.read_bytes()[:100])
    torn = QuarkQuantizer(zm.model, reader, [], cache=shared).quantize(config(99.999), tmp_path / "torn.onnx", [])
    assert torn["calibration_derived"] is False and len(kept.read_bytes()) > 100
    fresh_again = QuarkQuantizer(zm.model, reader, [], cache=CalibrationCache(tmp_path / "fresh2", {"m": "x"}, "d"))
    fresh_again.quantize(config(99.999), tmp_path / "fresh_999.onnx", [])
    assert initializers(tmp_path / "torn.onnx") == initializers(tmp_path / "fresh_999.onnx")

    # a collection another worker is making (its lock held, the file not there yet) is waited for, then reused
    import threading
    import time

    from compiler.runtime.histogram_cache import collection_lock
    from compiler.runtime.sensitivity_cache import exclusive

    collection = kept.read_bytes()
    locked, hold_s = threading.Event(), 4.0

    def another_worker_collecting() -> None:
        with exclusive(collection_lock(kept)):
            kept.unlink()
            locked.set()
            time.sleep(hold_s)
            kept.write_bytes(collection)

    worker = threading.Thread(target=another_worker_collecting)
    worker.start()
    locked.wait()
    started = time.monotonic()
    waited = QuarkQuantizer(zm.model, reader, [], cache=shared).quantize(config(99.95), tmp_path / "waited.onnx", [])
    worker.join()
    assert waited["calibration_derived"] is True and time.monotonic() - started >= hold_s
    assert len(list((tmp_path / "shared").glob("*.histograms"))) == 1
    assert not list((tmp_path / "shared").glob(".*.lock"))


@pytest.mark.parametrize("model, range_symmetric", [("resnet_bn", False), ("detector", True)])
def test_layerwise_percentile_and_percentile_share_one_collection_exactly(tmp_path: Path, model: str,
                                                                         range_symmetric: bool) -> None:
    """LayerwisePercentile (on histograms, Quark's default) collects what Percentile collects: its ranges and model
    computed from a collection a Percentile quantization kept equal a fresh LayerwisePercentile calibration's, and
    the other way round; one .histograms file serves both."""
    import onnx
    from onnx import numpy_helper
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime.calibration_cache import RANGES_SAVED, CalibrationCache
    from compiler.runtime.histogram_cache import HISTOGRAMS
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names
    from compiler.runtime.step_clock import CLOCK

    def config(method: str, **extra: Any) -> dict[str, Any]:
        return {"activation": "Int8Spec", "activation_params": {"calibration_method": method}, "weight": "Int8Spec",
                "CalibTensorRangeSymmetric": range_symmetric, **extra}

    def initializers(path: Path) -> dict[str, Any]:
        return {t.name: numpy_helper.to_array(t).tolist() for t in onnx.load(str(path)).graph.initializer}

    def only_ranges(folder: Path) -> Any:
        [found] = [json.loads(p.read_text())["tensors_range"] for p in folder.glob("*.json")]
        return found

    zm = build(model, tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    CLOCK.install()
    RANGES_SAVED.install()
    HISTOGRAMS.install()

    def quantize(folder: str, cfg: dict[str, Any], name: str) -> dict[str, Any]:
        cache = CalibrationCache(tmp_path / folder, {"m": "x"}, "d")
        return QuarkQuantizer(zm.model, reader, [], cache=cache).quantize(cfg, tmp_path / name, [])

    # 99.9 is none of LayerwisePercentile's candidates (99.99, 99.999, 99.99999): the two models differ
    layerwise, percentile = config("LayerwisePercentile"), config("Percentile", Percentile=99.9)
    assert quantize("fresh_lwp", layerwise, "fresh_lwp.onnx")["calibration_derived"] is False
    assert quantize("fresh_pct", percentile, "fresh_pct.onnx")["calibration_derived"] is False
    assert initializers(tmp_path / "fresh_lwp.onnx") != initializers(tmp_path / "fresh_pct.onnx")  # they differ

    # Percentile collects, LayerwisePercentile derives
    assert quantize("a", config("Percentile", Percentile=99.99), "a_pct.onnx")["calibration_derived"] is False
    assert quantize("a", layerwise, "a_lwp.onnx")["calibration_derived"] is True
    assert initializers(tmp_path / "a_lwp.onnx") == initializers(tmp_path / "fresh_lwp.onnx")
    # LayerwisePercentile collects, Percentile derives
    assert quantize("b", layerwise, "b_lwp.onnx")["calibration_derived"] is False
    assert quantize("b", percentile, "b_pct.onnx")["calibration_derived"] is True
    assert initializers(tmp_path / "b_pct.onnx") == initializers(tmp_path / "fresh_pct.onnx")
    for folder in ("a", "b"):
        assert len(list((tmp_path / folder).glob("*.histograms"))) == 1
    assert only_ranges(tmp_path / "fresh_lwp") in [json.loads(p.read_text())["tensors_range"]
                                                   for p in (tmp_path / "a").glob("*.json")]
    # on raw outputs LayerwisePercentile is not served: it calibrates
    raw = config("LayerwisePercentile", LWPUseHistogram=False)
    assert quantize("a", raw, "raw.onnx")["calibration_derived"] is False


def test_a_collection_lock_that_cannot_be_taken_collects_without_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """An error taking the collection's lock (a read-only or full folder) must not reach Quark, whose calibration would
    answer it with MinMax ranges: the calibration collects on its own, says so, and the model is a fresh Percentile
    calibration's."""
    import onnx
    from onnx import numpy_helper
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime import histogram_cache
    from compiler.runtime.calibration_cache import RANGES_SAVED, CalibrationCache
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names
    from compiler.runtime.step_clock import CLOCK

    def no_lock(path: Path) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    def initializers(path: Path) -> dict[str, Any]:
        return {t.name: numpy_helper.to_array(t).tolist() for t in onnx.load(str(path)).graph.initializer}

    zm = build("resnet_bn", tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    config = {"activation": "Int8Spec", "activation_params": {"calibration_method": "Percentile"},
              "weight": "Int8Spec", "Percentile": 99.9}
    CLOCK.install()
    RANGES_SAVED.install()
    histogram_cache.HISTOGRAMS.install()
    QuarkQuantizer(zm.model, reader, [], cache=None).quantize(config, tmp_path / "plain.onnx", [])
    monkeypatch.setattr(histogram_cache, "exclusive", no_lock)
    cache = CalibrationCache(tmp_path / "cache", {"m": "x"}, "d")
    steps = QuarkQuantizer(zm.model, reader, [], cache=cache).quantize(config, tmp_path / "unlocked.onnx", [])
    assert steps["calibration_derived"] is False
    assert "lock could not be taken" in capsys.readouterr().err
    assert initializers(tmp_path / "unlocked.onnx") == initializers(tmp_path / "plain.onnx")
    assert not list((tmp_path / "cache").glob("*.histograms"))
