"""Reading ONNX files fast: a path in, onnx's own ModelProto out, without importing the onnx package.

`import onnx` costs about a second here (it loads ml_dtypes and the helpers); the compiler needs only
the protobuf classes onnx generates, so it loads onnx/onnx_ml_pb2.py by file. External data is never
read: the proto only names those files.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

# Numbers from onnx.proto (TensorProto.DataType), for names in model_analysis.json.
TENSOR_TYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
    16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
    21: "uint4", 22: "int4",
}
EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


@cache
def _protos() -> ModuleType:
    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("onnx is not installed")
    path = Path(spec.submodule_search_locations[0]) / "onnx_ml_pb2.py"
    module_spec = importlib.util.spec_from_file_location("qas_onnx_ml_pb2", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["qas_onnx_ml_pb2"] = module
    module_spec.loader.exec_module(module)
    return module


class NotOnnx(ValueError):
    """The bytes are not an ONNX ModelProto."""


def load_model(path: Path) -> Any:
    """An .onnx path in, its ModelProto (weights stored externally stay unread) out; NotOnnx if it is not one."""
    proto = _protos().ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except Exception as exc:  # protobuf raises DecodeError or RuntimeError depending on the backend
        raise NotOnnx(str(exc) or exc.__class__.__name__) from exc
    if not proto.HasField("graph") or proto.ir_version == 0:
        raise NotOnnx("no graph or ir_version")
    return proto
