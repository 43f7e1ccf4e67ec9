"""The model zoo (tests/zoo.py): each model is a valid ONNX model that runs on its samples with sensible outputs, the
same seed writes the same bytes, and its spec compiles with zero errors under every preset the matrix uses."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from .conftest import qas
from .zoo import PRESETS, ZOO, build

# What each model must hold for the matrix to test what it is named after.
SHAPES = {
    "resnet_bn": {"BatchNormalization", "Add", "GlobalAveragePool", "Gemm", "Conv"},
    "detector": {"Concat", "Resize", "Sigmoid", "Conv"},
    "transformer": {"MatMul", "LayerNormalization", "Softmax", "Erf"},
    "shared_init": {"Conv", "Gemm", "Concat"},
    "external_data": {"Conv", "Gemm"},
    "opset11": {"Conv", "Clip", "MaxPool", "Gemm"},
}


def digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ZOO)
def test_the_zoo_model_is_valid_small_and_runs_on_its_samples(tmp_path: Path, name: str) -> None:
    import onnxruntime

    zm = build(name, tmp_path)
    assert zm.model == tmp_path / "models" / f"{name}.onnx"
    onnx.checker.check_model(str(zm.model), full_check=True)  # by path: external data included
    model = onnx.load(str(zm.model))
    ops = {n.op_type for n in model.graph.node}
    assert SHAPES[name] <= ops, SHAPES[name] - ops
    assert zm.weight_nodes and set(zm.weight_nodes) <= {n.name for n in model.graph.node}
    files = list(zm.model.parent.glob(f"{name}.onnx*"))
    assert sum(p.stat().st_size for p in files) < 1_000_000
    session = onnxruntime.InferenceSession(str(zm.model), providers=["CPUExecutionProvider"])
    assert tuple(i.name for i in session.get_inputs()) == zm.inputs
    for which, count in (("calib", 8), ("eval", 4)):
        feeds = zm.feeds(which)
        assert len(feeds) == count
        results = [session.run(None, feed) for feed in feeds]
        for k, output in enumerate(zm.outputs):
            values = np.stack([r[k] for r in results])
            assert np.isfinite(values).all(), output
            assert values.std() > 1e-3, f"{output} is flat: quantization error would mean nothing"
            assert np.abs(values).max() < 1e3, f"{output} explodes"


def test_the_zoo_has_the_models_the_issue_asks_for(tmp_path: Path) -> None:
    assert ZOO == ("resnet_bn", "detector", "transformer", "shared_init", "external_data", "opset11")
    transformer = onnx.load(str(build("transformer", tmp_path).model))
    assert len(transformer.graph.input[0].type.tensor_type.shape.dim) == 3  # [1, seq, dim]
    detector = build("detector", tmp_path)
    assert len(detector.outputs) == 3
    shared = onnx.load(str(build("shared_init", tmp_path).model))
    uses: dict[str, int] = {}
    for node in shared.graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    assert sum(uses.get(i.name, 0) >= 2 for i in shared.graph.initializer) >= 4  # two weights, two biases
    assert all(p.suffix == ".npz" for p in build("shared_init", tmp_path).calib_dir.iterdir())  # two inputs
    external = onnx.load(str(build("external_data", tmp_path).model), load_external_data=False)
    assert all(i.data_location == onnx.TensorProto.EXTERNAL for i in external.graph.initializer)
    assert (tmp_path / "models" / "external_data.onnx.data").stat().st_size > 10_000
    opset = onnx.load(str(build("opset11", tmp_path).model)).opset_import
    assert [(o.domain, o.version) for o in opset] == [("", 11)]


def test_the_same_seed_writes_the_same_bytes_and_another_seed_does_not(tmp_path: Path) -> None:
    for name in ZOO:
        build(name, tmp_path / "a")
        build(name, tmp_path / "b")
        build(name, tmp_path / "c", seed=1)
    a, b, c = digest(tmp_path / "a"), digest(tmp_path / "b"), digest(tmp_path / "c")
    assert a == b and len(a) == len(ZOO) * (1 + 8 + 4) + 1  # + the external data file
    assert a.keys() == c.keys()
    assert {k for k in a if a[k] == c[k]} == {"models/external_data.onnx"}  # its graph only: the weights are outside
    build("resnet_bn", tmp_path / "a")  # rebuilt in place: same bytes, no stale samples
    assert digest(tmp_path / "a") == a


def test_extra_yaml_merges_into_the_spec(tmp_path: Path) -> None:
    from ruamel.yaml import YAML

    zm = build("resnet_bn", tmp_path)
    spec = zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=3, extra_yaml=(
        "search: {objectives: [accuracy, latency, size], override: {adaquant_params: null}}\n"
        "evaluation: {tolerance: 100}\noutput: {plots: true}\n"))
    data = YAML(typ="safe").load(spec.read_text())
    assert data["search"]["preset"] == "A8W8_SEARCH" and data["search"]["n_trials"] == 3
    assert data["search"]["objectives"] == ["accuracy", "latency", "size"]
    assert list(data["search"]["override"]) == ["adaround_params"]  # null removed the key
    assert data["evaluation"] == {"metric": "L2", "data": {"folder": "data/resnet_bn/eval"}, "tolerance": 100}
    assert data["output"] == {"plots": True} and data["model"] == "models/resnet_bn.onnx"
    with pytest.raises(ValueError, match="mapping"):
        zm.write_spec(tmp_path, extra_yaml="[1, 2]")


@pytest.mark.parametrize("name", ZOO)
def test_every_preset_compiles_the_zoo_models_spec_with_zero_errors(tmp_path: Path, name: str) -> None:
    zm = build(name, tmp_path)
    for preset in PRESETS:
        spec = zm.write_spec(tmp_path / preset.lower(), preset=preset, n_trials=2)
        done = qas("compile", str(spec), "--format", "json", timeout=300)
        result = json.loads(done.stdout)
        errors = [d for d in result["diagnostics"] if d["severity"] == "error"]
        # opset 11 and per-channel weights fail in Quark (issue 17 item 7); no preset quantizes weights per channel,
        # so every spec here must compile.
        assert done.returncode == 0 and not errors, (preset, result["diagnostics"])
        assert (spec.parent / "autosearch_output" / f"{name}_autosearch.py").is_file()
        warnings = {d["code"] for d in result["diagnostics"] if d["severity"] == "warning"}
        assert warnings <= ({"QAS705"} if name == "opset11" else set()), result["diagnostics"]
