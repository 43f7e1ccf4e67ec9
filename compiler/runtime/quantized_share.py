"""The quantized_fraction objective: the float model and a trial's quantized model in; how many of the float model's
weight nodes the trial quantized, and the share, out.

The quantizable nodes are the weight nodes (Conv, Gemm, MatMul with an initializer: where the compute and the bytes
are). One counts as quantized when the quantized model reads its weight through a DequantizeLinear, whatever Quark
renamed or fused it into (sensitivity_graph.quantized_weight_nodes, the mapping the sensitivity ranking uses). Nodes
without weights are left out: in a QDQ graph an activation op kept float and one quantized look alike (Q/DQ around
both, from their neighbours), so counting them would not tell trials apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def quantized_share(float_path: Path, quantized_path: Path) -> dict[str, Any]:
    """{"quantized": weight nodes quantized, "weight_nodes": all of them, "fraction": the share} (1.0 for a model with
    no weight node: nothing to keep float)."""
    import onnx

    from .sensitivity_graph import WEIGHT_OPS, quantized_weight_nodes

    float_model = onnx.load(str(float_path), load_external_data=False)
    quantized_model = onnx.load(str(quantized_path), load_external_data=False)
    initializers = {i.name for i in float_model.graph.initializer}
    weighted = {n.name for n in float_model.graph.node if n.op_type in WEIGHT_OPS and initializers & set(n.input[1:])}
    quantized = quantized_weight_nodes(float_model, quantized_model) & weighted
    return {"quantized": len(quantized), "weight_nodes": len(weighted),
            "fraction": len(quantized) / len(weighted) if weighted else 1.0}
