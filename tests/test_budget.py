"""Disk checks of the budget pass on real (sparse) model files: too big for the disk, and merely large."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from compiler.pipeline import compile_spec


def big_model_spec(tmp_path: Path, size: int) -> Path:
    (tmp_path / "calib").mkdir()
    with open(tmp_path / "huge.onnx", "wb") as handle:  # sparse: takes no real disk
        handle.truncate(size)
    spec = tmp_path / "spec.yaml"
    spec.write_text("qas: 1\nname: huge\nmodel: huge.onnx\ncalibration: {folder: calib}\n"
                    "search: {preset: XINT8_SEARCH, n_trials: 8}\ndevice: cpu\n")
    return spec


def test_a_search_that_cannot_fit_on_the_disk_is_refused(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    spec = big_model_spec(tmp_path, free // 4)  # 3 grid + 8 trials = 11 models of a quarter of the free space
    result = compile_spec(spec)
    codes = [d.code for d in result.diagnostics]
    assert "QAS405" in codes and not result.files
    (d,) = [d for d in result.diagnostics if d.code == "QAS405"]
    assert "11 models" in d.message and d.path == ("output", "dir")


def test_a_large_search_that_fits_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = big_model_spec(tmp_path, 20 * 10**9)  # 11 models of 20 GB
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**13, 0, 10**13))
    result = compile_spec(spec)
    assert [d.code for d in result.diagnostics] == ["QAS406"]
    assert result.plan.budget.disk_estimate_bytes == 11 * 20 * 10**9
    assert result.files  # a warning does not stop the compile


def test_external_data_counts_towards_the_model_size(tmp_path: Path) -> None:
    spec = big_model_spec(tmp_path, 1000)
    (tmp_path / "huge.onnx_data").write_bytes(b"\0" * 500)
    result = compile_spec(spec)
    assert result.plan.budget.model_bytes == 1500
    assert result.plan.external_data == "../huge.onnx_data"
