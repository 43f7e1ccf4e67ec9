"""Values that used to compile and fail later (issue 10): each refused at compile time, located, with a hint."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from compiler.check.paths import folder_problem
from compiler.commands.pipeline import compile_spec
from compiler.front import schema
from compiler.resources import load_schema

from .conftest import GOLDEN, qas, target_env

VALID: dict[str, Any] = {
    "qas": 1, "name": "v", "model": "m.onnx",
    "calibration": {"images": "img", "limit": 4, "preprocess": {"resize": [8, 8], "letterbox": {"pad": 114}}},
    "search": {"preset": "XINT8_SEARCH", "seed": 0, "n_trials": 3, "max_failures": 2,
               "stop": {"min_trials": 2, "patience": 2}},
    "device": "cpu",
    "keep_float": {"sensitivity": {"samples": 4, "top": 5}, "search": {"top_k": [0, 1]}},
}


def _integer_paths(node: Any, path: tuple = ()) -> list[tuple]:
    """Every schema path whose value is typed integer (array items as index 0)."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "integer":
            found.append(path)
        for key, sub in node.get("properties", {}).items():
            found += _integer_paths(sub, (*path, key))
        if isinstance(node.get("items"), dict):
            found += _integer_paths(node["items"], (*path, 0))
        if "$ref" in node:
            found += _integer_paths(load_schema("spec.schema.json")["$defs"][node["$ref"].split("/")[-1]], path)
    return found


def _with(data: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def test_the_valid_base_is_valid() -> None:
    assert schema.check(VALID) == []


INTEGER_PATHS = [p for p in _integer_paths(load_schema("spec.schema.json"))
                 if p[0] != "evaluation"]  # evaluation.data is the same reader as calibration


def test_the_integer_fields_are_all_covered() -> None:
    assert set(INTEGER_PATHS) == {("qas",), ("calibration", "limit"), ("calibration", "preprocess", "resize", 0),
                                  ("calibration", "preprocess", "letterbox", "pad"),
                                  ("search", "seed"), ("search", "n_trials"), ("search", "max_failures"),
                                  ("search", "workers"), ("keep_float", "sensitivity", "samples"),
                                  ("keep_float", "sensitivity", "top"), ("keep_float", "search", "top_k", 0),
                                  ("keep_float", "search", "sections"),
                                  ("search", "stop", "min_trials"), ("search", "stop", "patience")}


@pytest.mark.parametrize("path", [p for p in INTEGER_PATHS if p != ("qas",)])
def test_every_integer_field_refuses_a_float(path: tuple) -> None:
    (found,) = schema.check(_with(VALID, path, 3.0))
    assert found.code == "QAS203" and found.path == path and found.hint == "write 3"
    assert "must be an integer, not 3.0" in found.message
    (fraction,) = schema.check(_with(VALID, path, 2.5))
    assert fraction.code == "QAS203" and "without a decimal point" in fraction.hint


@pytest.mark.parametrize("value", [1.0, "1", 2, True])
def test_only_the_integer_1_is_a_spec_format(value: Any) -> None:
    (found,) = schema.check(_with(VALID, ("qas",), value))
    assert found.code == "QAS207" and found.path == ("qas",) and "`qas: 1`" in found.hint


@pytest.mark.parametrize("path, value", [
    (("search", "n_trials"), 10**23), (("search", "seed"), -(2**60)), (("calibration", "limit"), 2**53 + 1),
    (("search", "override"), {"adaquant_params": {"num_iterations": {"type": "int", "low": 1, "high": 1e29}}}),
])
def test_numbers_beyond_2_53_are_refused_anywhere(path: tuple, value: Any) -> None:
    found = schema.check(_with(VALID, path, value))
    assert [d.code for d in found] == ["QAS205"] and "2**53" in found[0].message
    assert found[0].path[:len(path)] == path


@pytest.mark.parametrize("path, value, bound", [
    (("search", "seed"), 2**31, "at most 2147483647"), (("search", "n_trials"), 1_000_001, "at most 1000000"),
    (("search", "max_failures"), 10**7, "at most 1000000"),
    (("calibration", "preprocess", "resize", 1), 20000, "at most 16384"),
    (("calibration", "limit"), 0, "at least 1"),
])
def test_integer_fields_have_sane_maxima(path: tuple, value: int, bound: str) -> None:
    (found,) = schema.check(_with(VALID, path, value))
    assert found.code == "QAS205" and found.path == path and bound in found.message


def test_a_readers_own_arguments_pass_through_whatever_their_size() -> None:
    data = _with(VALID, ("calibration",), {"reader": "r.py:R", "args": {"offset": 2**64, "scale": 1e300}})
    assert schema.check(data) == []


@pytest.mark.parametrize("line, written", [
    ("  dir: autosearch_output", '  dir: "a\\0b"'),
    ("model: models/tinycnn.onnx", 'model: "models/tiny\\0cnn.onnx"'),
    ("  folder: data/calib", '  folder: "data/\\0calib"'),
])
def test_a_nul_byte_in_a_path_is_a_located_error_not_a_crash(example_copy: Path, line: str, written: str) -> None:
    spec = example_copy / "spec.yaml"
    text = spec.read_text()
    assert line in text
    spec.write_text(text.replace(line, written, 1))
    for command in ("validate", "compile"):
        result = qas(command, str(spec))
        assert result.returncode == 1, result.stderr
        row = text.splitlines().index(line) + 1
        assert f"spec.yaml:{row}:" in result.stderr and "error[QAS205]" in result.stderr and "NUL byte" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (example_copy / "autosearch_output").exists()


def test_a_nul_byte_in_a_readers_own_arguments_passes_through() -> None:
    data = _with(VALID, ("calibration",), {"reader": "r.py:R", "args": {"sep": "\0"}})
    assert schema.check(data) == []


def test_folder_problem_names_what_is_in_the_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    assert folder_problem(tmp_path / "new" / "deeper") is None
    assert folder_problem(tmp_path / "file", base=tmp_path) == "file is a file, not a folder"
    assert folder_problem(tmp_path / "file" / "x", base=tmp_path) == "file is a file, so file/x cannot be created"
    assert "cannot be used: File name too long" in folder_problem(tmp_path / ("a" * 300))
    monkeypatch.setattr("compiler.check.paths.os.access", lambda *_args: False)  # root may write anywhere: pretend
    assert folder_problem(tmp_path, base=tmp_path.parent) == f"{tmp_path.name} is not writable"
    assert folder_problem(tmp_path / "new", base=tmp_path) == f"{tmp_path} is not writable, so new cannot be created"


def test_validate_reports_an_unwritable_output_folder_at_output_dir(example_copy: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("compiler.check.paths.os.access", lambda *_args: False)
    spec = example_copy / "spec.yaml"
    result = compile_spec(spec, target_env(GOLDEN / "grid_sampler"))
    (found,) = result.diagnostics
    row = spec.read_text().splitlines().index("  dir: autosearch_output") + 1
    assert (found.code, found.path, found.line, found.col) == ("QAS803", ("output", "dir"), row, 8)
    assert found.message == f"output.dir cannot be written: {example_copy} is not writable, so " \
                            "autosearch_output cannot be created"


def test_a_sample_whose_data_is_not_what_its_header_declares_is_refused(tmp_path: Path) -> None:
    import io
    import zipfile

    import numpy as np

    from compiler.check.samples import read_headers

    array = np.arange(24, dtype="float32").reshape(2, 3, 4)
    buffer = io.BytesIO()
    np.save(buffer, array)
    whole = buffer.getvalue()
    (tmp_path / "ok.npy").write_bytes(whole)
    np.savez_compressed(tmp_path / "ok.npz", a=array, b=np.zeros((0, 5), "int64"))
    assert read_headers(tmp_path / "ok.npy") == {None: ("float32", (2, 3, 4))}
    assert read_headers(tmp_path / "ok.npz") == {"a": ("float32", (2, 3, 4)), "b": ("int64", (0, 5))}
    (tmp_path / "short.npy").write_bytes(whole[:-1])
    with pytest.raises(ValueError, match=r"truncated: .*\(96 bytes of data\), but only 95 bytes"):
        read_headers(tmp_path / "short.npy")
    (tmp_path / "long.npy").write_bytes(whole + b"\0")
    with pytest.raises(ValueError, match="1 bytes follow the 96 bytes of data"):
        read_headers(tmp_path / "long.npy")
    with zipfile.ZipFile(tmp_path / "short.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.npy", whole[:-8])
    with pytest.raises(ValueError, match=r"member 'a\.npy': truncated"):
        read_headers(tmp_path / "short.npz")


@pytest.mark.parametrize("key", ["n_trials", "n_trails", "N_Trials"])
def test_a_misplaced_search_key_at_the_top_level_is_one_error_naming_search(key: str) -> None:
    data = copy.deepcopy(VALID)
    del data["search"]["n_trials"]
    data[key] = 3
    (found,) = schema.check(data)
    assert found.code == "QAS201" and found.path == (key,)
    assert "search.n_trials" in found.hint


def test_a_near_miss_of_a_required_key_is_one_error() -> None:
    data = copy.deepcopy(VALID)
    data["search"]["n_trails"] = data["search"].pop("n_trials")
    data["search"]["presett"] = data["search"].pop("preset")
    found = schema.check(data)
    assert [(d.code, d.path[-1], d.hint) for d in found] == [
        ("QAS201", "n_trails", "did you mean 'n_trials'?"), ("QAS201", "presett", "did you mean 'preset'?")]


def test_an_unknown_key_with_no_near_miss_anywhere_keeps_the_missing_key_error() -> None:
    data = copy.deepcopy(VALID)
    del data["search"]["n_trials"]
    data["search"]["budget"] = 3
    assert sorted(d.code for d in schema.check(data)) == ["QAS201", "QAS202"]
