"""Sensitivity analysis: a float model, a base configuration and samples in; nodes and blocks ranked by the output
error their quantization causes (sensitivity.json), and the prefix of that ranking a trial keeps in float, out.

Cost: one quantization with the base configuration, then one inference pass per candidate over the evaluation
samples. "Keep candidate N in float" is simulated on the quantized graph as Quark's exclude does it: N's weights
and bias read their float initializers (their DequantizeLinear bypassed) and N's own output loses its
QuantizeLinear/DequantizeLinear pair; the output error that goes away is N's sensitivity. Standard library at
import time (numpy, onnx, onnxruntime inside the functions).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

from . import contract
from .console import say
from .files import write_json
from .lock import FileLock
from .patterns import block_pattern

SENSITIVITY_FILE = contract.SENSITIVITY_FILE
FORMAT = 1
DEFAULTS = {"method": "L2", "samples": 8, "aggregate": "sum", "blocks": {}, "top": 20, "base": None, "search": None}
QDQ = ("QuantizeLinear", "DequantizeLinear")
KEEP_FLOAT_PARAM = {"top_k": "keep_float_top_k", "coverage": "keep_float_coverage"}  # the Optuna parameter's name


def options(given: dict[str, Any] | None) -> dict[str, Any]:
    """Settings.sensitivity (None: not declared) in; every option with its default out."""
    return {**DEFAULTS, **(given or {})}


# --- What the base configuration is ---------------------------------------------------------------------------
class FirstChoices:
    """A stand-in for an Optuna trial that always takes the first choice (the low end of a range)."""

    def suggest_categorical(self, _name: str, choices: list[Any]) -> Any:
        return choices[0]

    def suggest_int(self, _name: str, low: int, _high: int, step: int = 1) -> int:
        return low

    def suggest_float(self, _name: str, low: float, _high: float, log: bool = False) -> float:
        return low


def base_config(space: dict[str, Any]) -> dict[str, Any]:
    """The space's first choices, without fine-tuning (plain calibration: what the ranking is measured on)."""
    from .space import grid_space, suggest_config

    return suggest_config(FirstChoices(), grid_space(space))


# --- Groups and the ranking -----------------------------------------------------------------------------------
def group_nodes(names: list[str], blocks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Node names (graph order) and blocks {name: [regex]} in; {group: [nodes]} out, in order of first node.

    A node joins the first block with a pattern that matches it (RE2 search); an unmatched node is its own group."""
    compiled = [(block, [block_pattern(p) for p in patterns]) for block, patterns in blocks.items()]
    groups: dict[str, list[str]] = {}
    for name in names:
        block = next((b for b, patterns in compiled if any(p.search(name) for p in patterns)), name)
        groups.setdefault(block, []).append(name)
    return groups


AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "sum": sum, "max": max, "mean": lambda values: sum(values) / len(values)}


def rank(node_scores: dict[str, float], blocks: dict[str, list[str]], aggregate: str) -> list[dict[str, Any]]:
    """Per-node sensitivities in; groups [{name, nodes, score}], most sensitive first (ties by name), out."""
    groups = group_nodes(list(node_scores), blocks)
    ranked = [{"name": g, "nodes": nodes, "score": AGGREGATES[aggregate]([node_scores[n] for n in nodes])}
              for g, nodes in groups.items()]
    return sorted(ranked, key=lambda g: (-g["score"], g["name"]))


class Ranking:
    """The ranked groups of sensitivity.json; a search choice ({"top_k": k} | {"coverage": f}) in, the prefix out."""

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        self.groups = groups

    def prefix(self, choice: dict[str, Any] | None) -> list[dict[str, Any]]:
        """top_k: the k most sensitive groups; coverage: the fewest top groups whose positive scores reach that
        fraction of the total positive sensitivity (0: none)."""
        if not choice:
            return []
        if "top_k" in choice:
            return self.groups[:int(choice["top_k"])]
        target = float(choice["coverage"]) * sum(max(g["score"], 0.0) for g in self.groups)
        taken, covered = [], 0.0
        for group in self.groups:
            if covered >= target or group["score"] <= 0:
                break
            taken.append(group)
            covered += group["score"]
        return taken

    def float_nodes(self, choice: dict[str, Any] | None) -> dict[str, Any]:
        """A choice in; {"choice", "groups", "nodes"} out: what a trial keeps in float beyond the fixed keep_float."""
        taken = self.prefix(choice)
        return {"choice": choice, "groups": [g["name"] for g in taken], "nodes": [n for g in taken for n in g["nodes"]]}


def suggest_keep_float(trial: Any, search: dict[str, Any]) -> dict[str, Any]:
    """The search dimension's Optuna parameter: {"top_k": k} from the declared list, or {"coverage": f} in its range."""
    if "top_k" in search:
        return {"top_k": trial.suggest_categorical(KEEP_FLOAT_PARAM["top_k"], list(search["top_k"]))}
    low, high = search["coverage"]["low"], search["coverage"]["high"]
    return {"coverage": trial.suggest_float(KEEP_FLOAT_PARAM["coverage"], low, high)}


# --- The Q/DQ bypass --------------------------------------------------------------------------------------------
def own_qdq(quantized: Any, name: str) -> tuple[list[int], list[tuple[Any, Any]]]:
    """A quantized ModelProto and a node name in; (indices of its inputs read through a DequantizeLinear of an
    initializer, its outputs' (QuantizeLinear, DequantizeLinear) pairs) out."""
    graph = quantized.graph
    initializers = {i.name for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    node = next(n for n in graph.node if n.name == name)
    weights = [k for k, i in enumerate(node.input)
               if i in producer and producer[i].op_type == "DequantizeLinear" and producer[i].input[0] in initializers]
    pairs = []
    for out in node.output:
        for q in consumers.get(out, []):
            if q.op_type == "QuantizeLinear":
                pairs += [(q, dq) for dq in consumers.get(q.output[0], []) if dq.op_type == "DequantizeLinear"]
    return weights, pairs


def bypass(quantized: Any, float_model: Any, names: list[str]) -> Any:
    """A copy of the quantized model in which the named nodes run in float (their own Q/DQ bypassed)."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(quantized)
    graph = model.graph
    float_nodes = {n.name: n for n in float_model.graph.node}
    float_inits = {i.name: i for i in float_model.graph.initializer}
    have = {i.name for i in graph.initializer}
    for name in names:
        weights, pairs = own_qdq(model, name)
        node = next(n for n in graph.node if n.name == name)
        for k in weights:
            source = float_nodes[name].input[k]
            if source in float_inits:
                node.input[k] = source
                if source not in have:
                    graph.initializer.append(float_inits[source])
                    have.add(source)
        for q, dq in pairs:
            dq.op_type, dq.domain = "Identity", ""
            dq.input[:] = [q.input[0]]
            del dq.attribute[:]
    used = {i for n in graph.node for i in n.input}
    keep = [n for n in graph.node if not (n.op_type == "QuantizeLinear" and not any(o in used for o in n.output))]
    del graph.node[:]
    graph.node.extend(keep)
    return model


# --- Errors at the model output ---------------------------------------------------------------------------------
def output_error(method: str, reference: list[Any], found: list[Any]) -> float:
    """Mean over samples of the error of `found` against `reference` (flattened outputs): L2 (mean squared),
    KL (softmax of the reference to softmax of the found) or cosine (1 - cosine similarity)."""
    import numpy as np

    errors = []
    for f, q in zip(reference, found, strict=True):
        f, q = f.astype(np.float64), q.astype(np.float64)
        if method == "L2":
            errors.append(float(np.mean((f - q) ** 2)))
        elif method == "cosine":
            norm = float(np.linalg.norm(f) * np.linalg.norm(q))
            errors.append(1.0 - float(np.dot(f, q)) / norm if norm > 0 else float(np.any(f != q)))
        else:  # KL
            p, r = np.exp(f - f.max()), np.exp(q - q.max())
            p, r = p / p.sum(), r / r.sum()
            errors.append(float(np.sum(p * (np.log(p + 1e-12) - np.log(r + 1e-12)))))
    return float(np.mean(errors))


def sample_list(reader: Any, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` samples of a reader (rewound before and after)."""
    reader.reset_iter()
    samples = []
    while len(samples) < limit:
        sample = reader.get_next()
        if sample is None:
            break
        samples.append(sample)
    reader.reset_iter()
    return samples


class Runner:
    """Runs models (ModelProto) on the samples: each sample's outputs flattened into one vector."""

    def __init__(self, samples: list[dict[str, Any]], device: str) -> None:
        self.samples, self.device = samples, device
        self.inferences = 0

    def __call__(self, model: Any) -> list[Any]:
        import numpy as np
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # As written: onnxruntime's optimizer re-fuses a bypassed graph's remaining Q/DQ and undoes the bypass
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            from quark.onnx.operators.custom_ops import get_library_path

            options.register_custom_ops_library(get_library_path(self.device.split(":")[0].upper()))
        except ImportError:  # plain QDQ models need no custom ops
            pass
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=contract.PROVIDERS[self.device.split(":")[0]])
        self.inferences += len(self.samples)
        return [np.concatenate([o.reshape(-1) for o in session.run(None, s)]) for s in self.samples]


# --- The analysis and its cache ---------------------------------------------------------------------------------
def data_hash(*sample_lists: list[dict[str, Any]]) -> str:
    """The samples' bytes (inputs in name order) in; a sha256 out."""
    digest = hashlib.sha256()
    for samples in sample_lists:
        for sample in samples:
            for key in sorted(sample):
                digest.update(key.encode())
                digest.update(str(sample[key].dtype).encode() + str(sample[key].shape).encode())
                digest.update(sample[key].tobytes())
    return digest.hexdigest()


def cache_key(model_sha256: dict[str, str], base: dict[str, Any], data: str, method: str, samples: int,
              fixed: list[Any]) -> str:
    """What the node scores depend on: the model, the base configuration, the data and the method."""
    value = {"format": FORMAT, "model": model_sha256, "base": base, "data": data, "method": method,
             "samples": samples, "fixed_exclusions": fixed}
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def analyze(float_path: Path, quantize: Callable[[dict[str, Any], Path, list[Any]], None], base: dict[str, Any],
            exclusions: list[Any], runner: Runner, method: str, work: Path) -> dict[str, Any]:
    """Quantize once with `base`, then score each candidate by the output error its bypass removes.

    Candidates are the float model's nodes with Q/DQ of their own in the quantized model (fixed exclusions are
    float already). Scores: baseline error minus the error with the candidate in float (negative: it helped)."""
    import onnx

    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    quantized_path = work / "sensitivity_base.onnx"
    quantize(base, quantized_path, exclusions)
    quantize_s = time.monotonic() - started
    float_model = onnx.load(str(float_path))
    quantized = onnx.load(str(quantized_path))
    present = {n.name for n in quantized.graph.node}
    candidates = [n.name for n in float_model.graph.node
                  if n.name in present and any(own_qdq(quantized, n.name))]
    started = time.monotonic()
    reference = runner(float_model)
    baseline = output_error(method, reference, runner(quantized))
    scores = {}
    for name in candidates:
        scores[name] = baseline - output_error(method, reference, runner(bypass(quantized, float_model, [name])))
    return {"baseline_error": baseline, "nodes": scores,
            "cost": {"quantizations": 1, "quantize_s": round(quantize_s, 3), "candidates": len(candidates),
                     "inferences": runner.inferences, "infer_s": round(time.monotonic() - started, 3)}}


def load_cached(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def ensure(settings: Any, calib: Any, evaluation: Any, exclusions: list[Any],
           quantize: Callable[[dict[str, Any], Path, list[Any]], None]) -> Ranking:
    """The ranking for these settings: read from sensitivity.json when its key matches, else measured and written
    (with its charts). Several workers at once: one measures under a file lock, the others read its result."""
    opts = options(settings.sensitivity)
    base = opts["base"] if opts["base"] is not None else base_config(settings.search_space)
    samples = sample_list(evaluation, opts["samples"])
    if not samples:
        raise ValueError("the evaluation reader gave no samples for the sensitivity analysis")
    key = cache_key(settings.model_sha256, base, data_hash(sample_list(calib, 10**9), samples), opts["method"],
                    len(samples), exclusions)
    path = settings.path(SENSITIVITY_FILE)
    with FileLock(settings.path(SENSITIVITY_FILE + ".lock")):
        data = load_cached(path, key)
        if data is not None:
            say(f"qas: sensitivity: reusing {SENSITIVITY_FILE} (same model, base configuration, data and method)")
        else:
            say(f"qas: sensitivity: quantizing once with the base configuration, then scoring each candidate on "
                f"{len(samples)} samples ({opts['method']})")
            measured = analyze(settings.model_path, quantize, base, exclusions, Runner(samples, settings.device),
                               opts["method"], settings.path(settings.temp_dir) if settings.temp_dir else settings.here)
            data = {"format": FORMAT, "key": key, "method": opts["method"], "samples": len(samples), "base": base,
                    "fixed_exclusions": exclusions, **measured}
        data["aggregate"], data["blocks"] = opts["aggregate"], opts["blocks"]
        data["groups"] = rank(data["nodes"], opts["blocks"], opts["aggregate"])
        write_json(path, data)
    cost = data["cost"]
    say(f"qas: sensitivity: {cost['candidates']} candidates, {cost['inferences']} inferences in {cost['infer_s']:g} s "
        f"after one quantization of {cost['quantize_s']:g} s; most sensitive: "
        + ", ".join(f"{g['name']} ({g['score']:.3g})" for g in data["groups"][:3]))
    for line in write_charts(path, data["groups"][:opts["top"]], data["method"]):
        say(f"qas: sensitivity: {line}")
    return Ranking(data["groups"])


# --- Charts -----------------------------------------------------------------------------------------------------
def write_charts(path: Path, groups: list[dict[str, Any]], metric: str) -> list[str]:
    """The top groups in; sensitivity.html (plotly) and sensitivity.png (matplotlib), each when installed; what
    was written or why not, as lines, out."""
    names = [g["name"] for g in groups][::-1]
    scores = [g["score"] for g in groups][::-1]
    title = f"Output {metric} error removed by keeping each group in float (top {len(groups)})"
    lines = []
    try:
        import plotly.graph_objects as go

        figure = go.Figure(go.Bar(x=scores, y=names, orientation="h"))
        figure.update_layout(title=title, xaxis_title=f"{metric} error removed", height=200 + 22 * len(names))
        figure.write_html(str(path.with_suffix(".html")), include_plotlyjs="directory")
        lines.append(f"wrote {path.with_suffix('.html').name}")
    except ImportError:
        lines.append("plotly is not installed: no sensitivity.html")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 1.5 + 0.3 * len(names)))
        ax.barh(names, scores)
        ax.set_xlabel(f"{metric} error removed")
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(path.with_suffix(".png"), dpi=100)
        plt.close(fig)
        lines.append(f"wrote {path.with_suffix('.png').name}")
    except ImportError:
        lines.append("matplotlib is not installed: no sensitivity.png")
    return lines
