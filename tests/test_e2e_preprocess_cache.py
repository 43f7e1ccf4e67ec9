"""Quark's graph simplifications once per input (compiler/runtime/preprocess_cache.py) with the real amd-quark on zoo
models of every shape: each quantized model is byte for byte the one Quark writes without the cache, whatever the
configuration, the exclusions or the model (BatchNorm folding, a detector head, a transformer block, shared
initializers, opset 11), and every quantization after the first answers from it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
import pytest

from .conftest import needs_quark
from .zoo import build

pytestmark = [pytest.mark.e2e, needs_quark]

CONFIGS = [
    {"activation": "XInt8Spec", "weight": "XInt8Spec"},
    {"activation": "Int8Spec", "activation_params": {"symmetric": False, "calibration_method": "Percentile"},
     "weight": "Int8Spec", "weight_params": {"symmetric": True, "quant_granularity": "Channel"}},
    {"activation": "Int16Spec", "weight": "Int8Spec", "cle_algo": "cle"},
]


@pytest.mark.parametrize("name", ["resnet_bn", "detector", "transformer", "shared_init", "opset11"])
def test_a_cached_simplification_writes_the_same_bytes_as_quark_alone(tmp_path: Path, name: str) -> None:
    from quark.onnx.calibration import CachedDataReader

    from compiler.runtime.preprocess_cache import PREPROCESS
    from compiler.runtime.quantize import QuarkQuantizer
    from compiler.runtime.readers import FolderReader, model_input_names

    zm = build(name, tmp_path)
    reader = CachedDataReader(FolderReader(zm.calib_dir, model_input_names(zm.model), None))
    quantizer = QuarkQuantizer(zm.model, reader, [])
    graph = onnx.load(str(zm.model), load_external_data=False).graph
    first_node = next(n.name for n in graph.node if n.op_type in ("Conv", "MatMul", "Gemm"))  # kept float once
    PREPROCESS.install()
    hits_before = PREPROCESS.hits
    try:
        for k, config in enumerate(CONFIGS):
            if name == "opset11" and "weight_params" in config:  # per-channel weights need opset 13 (Quark refuses)
                config = {**config, "weight_params": {**config["weight_params"], "quant_granularity": "Tensor"}}
            exclusions = [first_node] if k == 1 else []
            digests = []
            for enabled in (False, True):
                PREPROCESS.enabled = enabled
                output = tmp_path / f"q{k}_{enabled}.onnx"
                quantizer.quantize(config, output, exclusions)
                digests.append(hashlib.sha256(output.read_bytes()).hexdigest())
            assert digests[0] == digests[1], f"config {k}: the cached simplification changed the model"
    finally:
        PREPROCESS.enabled = False
    # onnxslim's input is the float model every time; onnxruntime's can differ by configuration (shared initializers
    # are copied per quantization type), so at least one hit a quantization after the first
    assert PREPROCESS.hits - hits_before >= len(CONFIGS) - 1
