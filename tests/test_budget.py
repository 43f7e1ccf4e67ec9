"""Disk checks of the budget pass on real (sparse) model files: too big for the disk, and merely large."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from compiler.check.budget_facts import quantized_model_bytes
from compiler.commands.pipeline import compile_spec

from .conftest import EXAMPLE_DIR, model_with_external_data


def big_model_spec(tmp_path: Path, size: int) -> Path:
    shutil.copytree(EXAMPLE_DIR / "data" / "calib", tmp_path / "calib")
    model_with_external_data(tmp_path, size)
    spec = tmp_path / "spec.yaml"
    spec.write_text("qas: 1\nname: huge\nmodel: big.onnx\ncalibration: {folder: calib}\n"
                    "search: {preset: XINT8_SEARCH, n_trials: 8}\ndevice: cpu\n")
    return spec


def test_a_search_that_cannot_fit_on_the_disk_is_refused(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    spec = big_model_spec(tmp_path, free)  # 3 grid + 8 trials = 11 models of a quarter of the free space each
    result = compile_spec(spec)
    codes = [d.code for d in result.diagnostics]
    assert "QAS405" in codes and not result.files
    (d,) = [d for d in result.diagnostics if d.code == "QAS405"]
    assert "11 models" in d.message and d.path == ("output", "dir")


def test_a_large_search_that_fits_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = big_model_spec(tmp_path, 40 * 10**9)  # 11 models of 40 GB, 10 GB each once quantized
    spec.write_text(spec.read_text().replace("n_trials: 8", "n_trials: 8, engine: autosearchpro"))
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**13, 0, 10**13))
    # hashing 20 GB of sparse zeros proves nothing here and takes a minute (tests/test_runtime.py checks the hash)
    monkeypatch.setattr("compiler.back.facts.file_sha256", lambda path: "0" * 64)
    result = compile_spec(spec)
    assert [d.code for d in result.diagnostics] == ["QAS406"]
    budget = result.plan.budget
    assert budget.dump_bytes == 2 * 8 * 10 * 4  # float + one quantized dump of 8 samples x 10 float32 logits
    assert budget.disk_estimate_bytes == 11 * budget.quantized_bytes + budget.dump_bytes
    assert budget.quantized_bytes < budget.model_bytes / 3  # 8-bit weights: a quarter, + Q/DQ nodes
    assert result.files  # a warning does not stop the compile


@pytest.mark.parametrize("keep, on_disk", [("all", 12), ("best", 3), ("top-4", 6)])
def test_engine_qas_counts_the_models_keep_models_leaves(tmp_path: Path, keep: str, on_disk: int) -> None:
    spec = big_model_spec(tmp_path, 500)
    spec.write_text(spec.read_text() + f"output: {{keep_models: {keep}}}\n")
    budget = compile_spec(spec).plan.budget
    # 11 models produced; kept + the one being scored, + the best_model.onnx copy; no output dumps
    assert budget.models_produced == 11 and budget.dump_bytes == 0
    assert budget.disk_estimate_bytes == on_disk * budget.quantized_bytes


def test_external_data_counts_towards_the_model_size(tmp_path: Path) -> None:
    spec = big_model_spec(tmp_path, 500)
    result = compile_spec(spec)
    assert result.plan.budget.model_bytes == (tmp_path / "big.onnx").stat().st_size + 500
    assert result.plan.external_data == "../big.onnx_data"
    assert result.plan.model_analysis["external_data"] == [{"location": "big.onnx_data", "exists": True, "bytes": 500}]


@pytest.mark.parametrize("weight, fraction", [("XInt8Spec", 1 / 4), ("Int16Spec", 1 / 2)])
def test_disk_counts_models_at_their_quantized_size(tmp_path: Path, weight: str, fraction: float) -> None:
    spec = big_model_spec(tmp_path, 4 * 10**6)
    spec.write_text(spec.read_text().replace("n_trials: 8}", f"n_trials: 8, override: {{weight: [{weight}]}}}}"))
    budget = compile_spec(spec).plan.budget
    nodes = 7  # the example's quantizable nodes
    assert budget.quantized_bytes == pytest.approx(budget.model_bytes * fraction, abs=nodes * 1000)
    assert budget.disk_estimate_bytes == 12 * budget.quantized_bytes  # 11 models + best_model.onnx, no dumps


def test_every_zoo_model_is_counted_at_its_quantized_size_on_disk(tmp_path: Path) -> None:
    from .zoo import ZOO, build

    for name in ZOO:
        zm = build(name, tmp_path / name)
        result = compile_spec(zm.write_spec(tmp_path / name, preset="A16W8_SEARCH"))
        budget, nodes = result.plan.budget, sum(result.plan.model_analysis["quantizable_op_counts"].values())
        # Int8 weights (A16W8 quantizes activations to 16 bits, weights to 8): a quarter, + the Q/DQ nodes
        assert budget.quantized_bytes == quantized_model_bytes(budget.model_bytes, 8, nodes) < budget.model_bytes, name
