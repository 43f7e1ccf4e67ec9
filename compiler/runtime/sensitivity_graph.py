"""Quantized graph to float graph, by tensors: a float and a quantized ModelProto in; the candidates of the sensitivity
analysis (each a set of quantized nodes with Q/DQ of their own, mapped to the float nodes they came from) out, and a
copy of the quantized model in which chosen candidates run as their float nodes (the bypass).

Quark renames and fuses nodes (BatchNormalization folded into Conv, MatMul+Add turned into Reshape+Gemm+Reshape,
Sigmoid into HardSigmoid+Mul), so node names do not carry over; activation tensors mostly do. Tensors joined by a
QuantizeLinear/DequantizeLinear chain are one value; a value whose chain holds a float activation's name is an
anchor. A quantized node with an anchored output is a sink; its region reaches back through unanchored values to
anchors; its float nodes are those between the same anchors in the float model. Standard library at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

QUANTIZE_OPS = ("QuantizeLinear", "ExtendedQuantizeLinear", "VitisQuantizeLinear")
DEQUANTIZE_OPS = ("DequantizeLinear", "ExtendedDequantizeLinear", "VitisDequantizeLinear")
QDQ_OPS = ("BFPQuantizeDequantize", "MXQuantizeDequantize")  # one node quantizes and dequantizes
Q_OPS = QUANTIZE_OPS + DEQUANTIZE_OPS + QDQ_OPS
WEIGHT_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
BODY_OPS = ("If", "Loop", "Scan")  # their bodies are subgraphs: neither candidates nor bypassed
PREFIX = "qas_float"


@dataclass(frozen=True)
class Region:
    """One sink of the quantized graph: its index, {float anchor: raw tensor it writes}, and its float nodes."""

    sink: int
    outputs: dict[str, str]
    float_nodes: tuple[str, ...]
    weights: bool = False  # it reads a weight through a DequantizeLinear


@dataclass(frozen=True)
class Candidate:
    """What the analysis scores: a name (its main float node), the float nodes it stands for, and its regions."""

    name: str
    nodes: tuple[str, ...]
    regions: tuple[Region, ...]


class _Classes:
    """Union-find over tensor names: a tensor and its (de)quantized forms are one value."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        root = name
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        self.parent[name] = root
        return root

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def _constants(graph: Any) -> set[str]:
    """Tensors computed from initializers alone (weights, their DequantizeLinear, Constant outputs)."""
    const = {i.name for i in graph.initializer} | {""}
    changed = True
    while changed:
        changed = False
        for node in graph.node:
            if all(i in const for i in node.input) and not set(node.output) <= const:
                const.update(node.output)
                changed = True
    return const


def _float_tensors(float_graph: Any) -> set[str]:
    """The float model's activations: its inputs and every node output (not its initializers)."""
    initializers = {i.name for i in float_graph.initializer}
    return ({i.name for i in float_graph.input if i.name not in initializers}
            | {o for n in float_graph.node for o in n.output if o})


def candidates(float_model: Any, quantized: Any, unmapped: list[str] | None = None) -> list[Candidate]:
    """The quantized nodes with Q/DQ of their own (weights read through a DequantizeLinear, or outputs through a
    QuantizeLinear), grouped by the float nodes they map to, in the float model's node order. Those that map to no
    named float node are appended to `unmapped` (their quantized names), when given."""
    graph, fgraph = quantized.graph, float_model.graph
    activations = _float_tensors(fgraph)
    const = _constants(graph)
    classes, anchor = _anchored_classes(graph, activations, const)
    producer = {o: k for k, n in enumerate(graph.node) for o in n.output if o}
    quantized_values = {classes.find(n.input[0]) for n in graph.node if n.op_type in QUANTIZE_OPS + QDQ_OPS and n.input}
    order = {n.name: k for k, n in enumerate(fgraph.node)}
    fproducer = {o: n for n in fgraph.node for o in n.output if o}

    def is_compute(k: int) -> bool:
        node = graph.node[k]
        return node.op_type not in Q_OPS and not set(node.output) <= const

    def source(tensor: str) -> int | None:
        """The compute node writing a value (through its Q/DQ chain), or None (a graph input)."""
        k = producer.get(tensor)
        while k is not None and graph.node[k].op_type in Q_OPS:
            k = producer.get(graph.node[k].input[0])
        return k

    regions: list[tuple[Region, bool]] = []
    for k, node in enumerate(graph.node):
        outs = {anchor[classes.find(o)]: o for o in node.output if o and classes.find(o) in anchor and o not in const}
        if not is_compute(k) or not outs:
            continue
        weights = False
        seen, stack = {k}, [k]
        while stack:  # back through unanchored values to the anchors
            for tensor in graph.node[stack.pop()].input:
                if tensor in const:
                    p = producer.get(tensor)
                    weights = weights or (p is not None and graph.node[p].op_type in DEQUANTIZE_OPS + QDQ_OPS)
                    continue
                if classes.find(tensor) in anchor:
                    continue
                p = source(tensor)
                if p is not None and p not in seen and is_compute(p):
                    seen.add(p)
                    stack.append(p)
        own = weights or any(classes.find(o) in quantized_values for o in outs.values())
        regions.append((Region(k, outs, _float_region(outs, fproducer, anchor.values(), order), weights), own))
    return _grouped([region for region, own in regions if own], graph, fgraph, unmapped)


def _anchored_classes(graph: Any, activations: set[str], const: set[str]) -> tuple[_Classes, dict[str, str]]:
    """A quantized graph, the float model's activation names and the constant values in; the classes of values joined
    by Q/DQ nodes and each class's float activation (class root -> name) out."""
    classes = _Classes()
    for node in graph.node:
        if node.op_type in Q_OPS and node.input and node.output:
            classes.union(node.input[0], node.output[0])
    anchor: dict[str, str] = {}
    every = {t for n in graph.node for t in (*n.input, *n.output) if t} | {i.name for i in graph.input}
    for tensor in every:
        if tensor in activations and tensor not in const:
            anchor.setdefault(classes.find(tensor), tensor)
    return classes, anchor


def _grouped(regions: list[Region], graph: Any, fgraph: Any, unmapped: list[str] | None) -> list[Candidate]:
    """The regions with Q/DQ of their own in; one Candidate per float node they map to, in the float model's order,
    out (a region that maps to no float node is appended to `unmapped`, by its quantized name)."""
    order = {n.name: k for k, n in enumerate(fgraph.node)}
    by_name: dict[str, list[Region]] = {}
    for region in regions:
        if region.float_nodes:
            by_name.setdefault(_main_node(region.float_nodes, fgraph), []).append(region)
        elif unmapped is not None:
            unmapped.append(graph.node[region.sink].name or graph.node[region.sink].output[0])
    found = [Candidate(name, tuple(sorted({n for r in rs for n in r.float_nodes}, key=order.__getitem__)), tuple(rs))
             for name, rs in by_name.items()]
    return sorted(found, key=lambda c: order[c.name])


def _float_region(outputs: dict[str, str], fproducer: dict[str, Any], anchored: Any, order: dict[str, int]
                  ) -> tuple[str, ...]:
    """The float nodes that compute the anchored outputs from other anchors (or initializers), in graph order."""
    stop = set(anchored)
    found: dict[int, Any] = {}
    stack = [fproducer[a] for a in outputs if a in fproducer]
    while stack:
        node = stack.pop()
        if id(node) in found or node.op_type in BODY_OPS:
            continue
        found[id(node)] = node
        stack += [fproducer[i] for i in node.input if i and i not in stop and i in fproducer]
    if any(not n.name for n in found.values()):
        return ()  # keep_float names nodes: a region with an unnamed float node cannot be kept float
    return tuple(sorted((n.name for n in found.values()), key=order.__getitem__))


def _main_node(nodes: tuple[str, ...], fgraph: Any) -> str:
    """A candidate's name: its first weight node (Conv, Gemm, MatMul with an initializer), else its last node."""
    initializers = {i.name for i in fgraph.initializer}
    by_name = {n.name: n for n in fgraph.node}
    weighted = [n for n in nodes if by_name[n].op_type in WEIGHT_OPS and initializers & set(by_name[n].input[1:])]
    return weighted[0] if weighted else nodes[-1]


def quantized_weight_nodes(float_model: Any, quantized: Any) -> set[str]:
    """The float model's weight nodes (Conv, Gemm, MatMul with an initializer) whose weights the quantized model reads
    through a DequantizeLinear, whatever Quark renamed or fused them into."""
    initializers = {i.name for i in float_model.graph.initializer}
    weighted = {n.name for n in float_model.graph.node if n.op_type in WEIGHT_OPS and initializers & set(n.input[1:])}
    return {n for c in candidates(float_model, quantized) if any(r.weights for r in c.regions) for n in c.nodes
            if n in weighted}


def unranked_bodies(float_model: Any) -> list[str]:
    """The float model's If/Loop/Scan nodes: their bodies' nodes are not ranked."""
    return [n.name or n.op_type for n in float_model.graph.node if n.op_type in BODY_OPS]


def bypass(quantized: Any, float_model: Any, chosen: list[Candidate]) -> Any:
    """A copy of the quantized model in which each chosen candidate runs as its float nodes, with the float
    initializers (under names of their own, so nothing is defined twice), reading the same inputs, and writing its
    outputs without their QuantizeLinear/DequantizeLinear."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(quantized)
    graph, fgraph = model.graph, float_model.graph
    fnodes = {n.name: n for n in fgraph.node}
    finits = {i.name: i for i in fgraph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for tensor in node.input:
            consumers.setdefault(tensor, []).append(node)
    added_inits: set[str] = set()
    values = _values(graph)
    for c, candidate in enumerate(chosen):
        for r, region in enumerate(candidate.regions):
            tag = f"{PREFIX}/{c}.{r}/"
            inside = {o for name in region.float_nodes for o in fnodes[name].output}
            sink = graph.node[region.sink]
            for k, out in enumerate(sink.output):  # the sink no longer writes them: the float nodes do
                if out in region.outputs.values():
                    sink.output[k] = tag + "replaced/" + out
            for name in region.float_nodes:
                node = onnx.NodeProto()
                node.CopyFrom(fnodes[name])
                node.name = tag + name
                for k, tensor in enumerate(node.input):
                    if tensor in finits:
                        node.input[k] = tag + tensor
                        if tag + tensor not in added_inits:
                            init = onnx.TensorProto()
                            init.CopyFrom(finits[tensor])
                            init.name = tag + tensor
                            graph.initializer.append(init)
                            added_inits.add(tag + tensor)
                    elif tensor in inside:
                        node.input[k] = region.outputs.get(tensor, tag + tensor)
                    elif tensor:
                        node.input[k] = values.get(tensor, tensor)
                for k, tensor in enumerate(node.output):
                    node.output[k] = region.outputs.get(tensor, tag + tensor)
                graph.node.append(node)
            for raw in region.outputs.values():  # the outputs lose their own Q/DQ
                for q in consumers.get(raw, []):
                    if q.op_type in QUANTIZE_OPS:
                        for dq in consumers.get(q.output[0], []):
                            if dq.op_type in DEQUANTIZE_OPS:
                                _to_identity(dq, raw)
                    elif q.op_type in QDQ_OPS:
                        _to_identity(q, raw)
    _prune(graph)
    _toposort(graph)
    return model


def _values(graph: Any) -> dict[str, str]:
    """Float activation name -> the tensor of the quantized graph that carries it as its consumers read it (the
    end of its Q/DQ chain), for float nodes that read an anchor."""
    producer = {o: n for n in graph.node for o in n.output}
    out: dict[str, str] = {}
    for node in graph.node:
        if node.op_type in DEQUANTIZE_OPS + QDQ_OPS and node.input:
            q = producer.get(node.input[0])
            raw = q.input[0] if q is not None and q.op_type in QUANTIZE_OPS else node.input[0]
            out[raw] = node.output[0]
    return out


def _to_identity(node: Any, source: str) -> None:
    node.op_type, node.domain = "Identity", ""
    node.input[:] = [source]
    del node.output[1:]
    del node.attribute[:]


def _prune(graph: Any) -> None:
    """Drop nodes none of whose outputs is read or a graph output, then initializers nothing reads."""
    outputs = {o.name for o in graph.output}
    while True:
        used = {i for n in graph.node for i in n.input} | outputs
        keep = [n for n in graph.node if any(o in used for o in n.output)]
        if len(keep) == len(graph.node):
            break
        del graph.node[:]
        graph.node.extend(keep)
    used = {i for n in graph.node for i in n.input} | outputs
    inits = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(inits)


def _toposort(graph: Any) -> None:
    """Nodes in an order where each reads only tensors written before it (stable otherwise)."""
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        rest = []
        for node in pending:
            if all(i in ready for i in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):  # a cycle or a missing input: leave the rest as it was, onnxruntime says why
            ordered += rest
            break
        pending = rest
    copies = [type(n)() for n in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


_warned: set[str] = set()


def warn_if_quantized(float_path: Any, trial_path: Any, kept: list[str]) -> None:
    """A trial's model and the float nodes it was to keep in float in; a warning (once per node) for each kept weight
    node whose weights Quark quantized anyway (a name its exclude did not find), so a ranking never claims a layer is
    float when it is not."""
    import onnx

    from .console import warn

    found = quantized_weight_nodes(onnx.load(str(float_path)), onnx.load(str(trial_path), load_external_data=False))
    missed = [n for n in kept if n in found and n not in _warned]
    if missed:
        _warned.update(missed)
        warn(f"qas: warning: keep_float: Quark quantized the weights of {', '.join(missed)} though the trial keeps "
             "them in float (its exclude did not find them by these names)")
