"""Model intake facts: an ONNX path (or a Spec) in, the model_analysis.json content (a plain dict) out.

Pure reading; deciding what is an error is the intake pass's (and `qas init`'s) job. `analysis(spec)`
caches per file version, so that the passes and `facts.derive` read the model once; `read_checked` is
the one way both read a model: the facts with their risks, or the risk that stopped the reading.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from compiler.check.onnx_proto import EXTERNAL, TENSOR_TYPES, NotOnnx, load_model
from compiler.check.resolved import spec_path
from compiler.front.model import Spec

TWO_GB = 2 * 1024**3
QDQ_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
QOPERATOR_OPS = {"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearAveragePool", "QLinearConcat",
                 "QLinearGlobalAveragePool", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearSoftmax", "QGemm",
                 "QLinearConvTranspose", "QLinearReduceMean", "QLinearWhere", "QAttention",
                 "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "DynamicQuantizeLSTM"}
# What onnxruntime's quantize_dynamic writes: activations quantized at run time (in both sets above).
DYNAMIC_OPS = {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
               "DynamicQuantizeLSTM", "QAttention"}
QUARK_DOMAINS = {"com.amd.quark", "com.vai.quantize"}
SHOWN_OPS = 8  # quantization op types a QAS702 message names
QUANTIZABLE_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Mul", "Concat", "AveragePool", "MaxPool",
                   "GlobalAveragePool", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Softmax", "Resize", "Pad",
                   "InstanceNormalization", "LayerNormalization", "Gather", "Split", "Slice", "Transpose", "Reshape"}


def _value_info(v: Any) -> dict[str, Any]:
    t = v.type.tensor_type
    dims: list[int | str | None] = []
    if t.HasField("shape"):
        for d in t.shape.dim:
            dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
    return {"name": v.name, "dtype": TENSOR_TYPES.get(t.elem_type, f"type{t.elem_type}"),
            "shape": dims if t.HasField("shape") else None}


def _all_nodes(graph: Any):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _all_nodes(attr.g)
            for sub in attr.graphs:
                yield from _all_nodes(sub)


def external_locations(model: Any) -> list[str]:
    found = []
    for tensor in model.graph.initializer:
        if tensor.data_location == EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value not in found:
                    found.append(entry.value)
    return found


def outside_folder(location: str) -> bool:
    """True unless an external-data location names a file inside the model's folder (or below it).

    Absolute paths (POSIX or Windows), `..` that climbs out, an empty name and a NUL byte are all
    outside: onnxruntime and Quark would read whatever file such a location names.
    """
    if not location or "\0" in location:
        return True
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).drive or PureWindowsPath(location).root:
        return True
    normal = posixpath.normpath(location.replace("\\", "/"))
    return normal == ".." or normal.startswith("../") or normal == "."


def analyze_model(path: Path) -> dict[str, Any]:
    """Model facts; raises onnx_proto.NotOnnx for a file that is not a model."""
    model = load_model(path)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [_value_info(v) for v in model.graph.input if v.name not in initializers]
    outputs = [_value_info(v) for v in model.graph.output]
    nodes = list(_all_nodes(model.graph))
    ops = Counter(n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}::{n.op_type}" for n in nodes)
    external = []
    for location in external_locations(model):
        if outside_folder(location):  # never looked at: the intake pass refuses it (QAS716)
            external.append({"location": location, "exists": None, "bytes": None})
            continue
        target = path.parent / location
        try:
            size = target.stat().st_size if target.is_file() else None
        except OSError:  # e.g. a name too long for the file system: as good as missing
            size = None
        external.append({"location": location, "exists": size is not None, "bytes": size})
    size = path.stat().st_size + sum(e["bytes"] or 0 for e in external)
    dynamic = [{"tensor": v["name"], "axis": i, "dim": d} for v in inputs + outputs
               for i, d in enumerate(v["shape"] or []) if not isinstance(d, int) or d <= 0]
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    return {
        "generated_by": "qas",
        "file": path.name,
        "ir_version": model.ir_version,
        "producer": {"name": model.producer_name, "version": model.producer_version},
        "opsets": dict(sorted(opsets.items())),
        "inputs": inputs,
        "outputs": outputs,
        "dynamic_dims": dynamic,
        # main graph: what keep_float names
        "nodes": [{"name": n.name, "op_type": n.op_type} for n in model.graph.node],
        "op_counts": dict(sorted(ops.items())),
        "quantizable_op_counts": dict(sorted((k, v) for k, v in ops.items() if k in QUANTIZABLE_OPS)),
        "external_data": external,
        "size_bytes": size,
        "has_qdq": any(n.op_type in QDQ_OPS for n in nodes),
        "has_qoperator": any(n.op_type in QOPERATOR_OPS for n in nodes),
        "has_quark_custom_ops": any(n.domain in QUARK_DOMAINS for n in nodes),
        "risks": [],
    }


def risks(analysis: dict[str, Any]) -> list[dict[str, str]]:
    """Facts in, the risks a search would run into out (severity, code, message, hint); the intake pass reports them."""
    found = []
    if analysis["has_qdq"] or analysis["has_qoperator"] or analysis["has_quark_custom_ops"]:
        found.append(_quantized_risk(analysis["op_counts"]))
    outside = [e["location"] for e in analysis["external_data"] if outside_folder(e["location"])]
    if outside:
        found.append({"severity": "error", "code": "QAS716",
                      "message": f"external data {', '.join(repr(o) for o in outside)} lies outside the model's "
                                 "folder; onnxruntime and Quark would read whatever file that names as weights",
                      "hint": "keep external data beside the model and save it with a relative location: "
                              "onnx.save(model, path, save_as_external_data=True, location='<model>.onnx_data')"})
    missing = [e["location"] for e in analysis["external_data"]
               if not e["exists"] and not outside_folder(e["location"])]
    if missing:
        found.append({"severity": "error", "code": "QAS703",
                      "message": f"external data {', '.join(repr(m) for m in missing)} is referenced but missing",
                      "hint": "keep the external data file beside the model, under the name the model records"})
    opset = analysis["opsets"].get("ai.onnx")
    if opset is not None and opset < 13:
        found.append({"severity": "warning", "code": "QAS705",
                      "message": f"default-domain opset {opset} is below 13; Quark's per-channel and QDQ passes "
                                 "expect 13+",
                      "hint": "convert it first, e.g. onnx.version_converter.convert_version(model, 17)"})
    return found


def _quantized_risk(op_counts: dict[str, int]) -> dict[str, str]:
    """The op counts of a quantized model in; the QAS702 risk naming the quantization ops found (and their kind)."""
    kinds: dict[str, list[str]] = {}
    for key, count in op_counts.items():  # keys: "Op", or "domain::Op" outside the default domain
        domain, _, op = key.rpartition("::")
        if domain in QUARK_DOMAINS:
            kind = "Quark custom-domain ops"
        elif op in DYNAMIC_OPS:
            kind = "dynamic quantization, as onnxruntime's quantize_dynamic writes"
        elif op in QDQ_OPS:
            kind = "QuantizeLinear/DequantizeLinear"
        elif op in QOPERATOR_OPS:
            kind = "QOperator ops"
        else:
            continue
        kinds.setdefault(kind, []).append(f"{key} x{count}")
    ops = [op for named in kinds.values() for op in named]
    listed = ", ".join(ops[:SHOWN_OPS]) + (f" and {len(ops) - SHOWN_OPS} more op types" if len(ops) > SHOWN_OPS else "")
    dynamic = any(k.startswith("dynamic") for k in kinds)
    return {"severity": "error", "code": "QAS702",
            "message": f"the model is already quantized ({'; '.join(kinds)}): it has {listed}; a quantization "
                       "search starts from the float model",
            "hint": "point `model` at the float model it was made from"
                    + (" (the model quantize_dynamic was given)" if dynamic else "")}


def _with_risks(path: Path) -> dict[str, Any]:
    facts = analyze_model(path)
    facts["risks"] = risks(facts)
    return facts


def read_checked(path: Path, shown: str, read: Callable[[Path], dict[str, Any]] = _with_risks,
                 ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A model path (and how messages name it) in; (its facts, their risks) out, or (None, [the QAS701/QAS704
    risk that stopped the reading]): a file protobuf cannot read, or one over 2 GB, is never parsed."""
    try:
        size = path.stat().st_size
        if size > TWO_GB:
            return None, [{"severity": "error", "code": "QAS704",
                           "message": f"{shown} is {size / 1024**3:.1f} GiB in one file; protobuf cannot read models "
                                      "over 2 GB without external data",
                           "hint": "save it with onnx.save(model, path, save_as_external_data=True)"}]
        facts = read(path)
    except NotOnnx:
        return None, [{"severity": "error", "code": "QAS701",
                       "message": f"{shown} is not a readable ONNX model (protobuf cannot parse it as a ModelProto)",
                       "hint": "check that the path names the .onnx file itself and that it is not truncated"}]
    except OSError as exc:
        return None, [{"severity": "error", "code": "QAS701",
                       "message": f"{shown} cannot be read: {exc.strerror or exc}", "hint": None}]
    return facts, facts["risks"]


@lru_cache(maxsize=8)
def _cached(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    return _with_risks(Path(path))


def analysis(spec: Spec) -> dict[str, Any]:
    """The spec's model facts with their risks; raises onnx_proto.NotOnnx for a file that is not a model."""
    path = spec_path(spec, spec.model)
    stat = path.stat()
    return _cached(str(path), stat.st_mtime_ns, stat.st_size)
