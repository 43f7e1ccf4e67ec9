"""The model zoo of the tests: a model name and a folder in; a seeded ONNX model, its samples and a spec out.

Each model is built by code at test time with onnx.helper and seeded numpy (no downloads, each well under 1 MB, so
real Quark runs on it take seconds), in the shapes real models have and the single example CNN lacks:

- resnet_bn: a ResNet-style CNN, BatchNormalization after every Conv, residual Adds, global pool, Gemm head;
- detector: a YOLOX-style head on a small backbone: SiLU (Sigmoid * x), Resize, Concat, three outputs;
- transformer: one encoder block on a [1, seq, dim] input: LayerNormalization, MatMul, Softmax, Gelu (Erf);
- shared_init: a two-input siamese CNN whose branches share their Conv initializers (samples as .npz);
- external_data: a CNN whose weights live in an external data file beside the model;
- opset11: a CNN at opset 11 (Clip with min/max inputs, MaxPool).

Usage::

    zm = build("resnet_bn", tmp_path)     # folder/models/resnet_bn.onnx, folder/data/resnet_bn/{calib,eval}/
    spec = zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=2)

The same name, seed and sample counts write the same bytes (the .npz files too: their zip entries carry a fixed date).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ZOO = ("resnet_bn", "detector", "transformer", "shared_init", "external_data", "opset11")
PRESETS = ("XINT8_SEARCH", "A8W8_SEARCH", "A16W8_SEARCH", "ADVANCED_SEARCH")
WEIGHT_OPS = ("Conv", "Gemm", "MatMul")

# Fine-tuning cut down so a trial with AdaRound or AdaQuant takes seconds on a CPU (every preset searches both).
SHORT_FINE_TUNING = {
    "adaround_params": {"num_iterations": {"type": "int", "low": 2, "high": 4, "step": 2}, "data_size": [4]},
    "adaquant_params": {"num_iterations": {"type": "int", "low": 2, "high": 4, "step": 2}, "data_size": [4]},
}


@dataclass(frozen=True)
class ZooModel:
    """A built zoo model: where its files are and what it holds."""

    name: str
    model: Path  # folder/models/<name>.onnx (external_data: plus <name>.onnx.data beside it)
    calib_dir: Path  # .npy per sample (one input) or .npz keyed by input name (several)
    eval_dir: Path
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    weight_nodes: tuple[str, ...]  # the Conv/Gemm/MatMul nodes that take a weight initializer, in graph order

    def feeds(self, which: str = "calib") -> list[dict[str, np.ndarray]]:
        """The samples of calib_dir or eval_dir as onnxruntime feeds, in file-name order."""
        folder = self.calib_dir if which == "calib" else self.eval_dir
        samples = []
        for path in sorted(folder.iterdir()):
            if path.suffix == ".npy":
                samples.append({self.inputs[0]: np.load(path)})
            elif path.suffix == ".npz":
                with np.load(path) as arrays:
                    samples.append({name: arrays[name] for name in self.inputs})
        return samples

    def write_spec(self, folder: Path, preset: str = "XINT8_SEARCH", n_trials: int = 2, extra_yaml: str = "",
                   file_name: str = "spec.yaml") -> Path:
        """Write a spec searching this model with `preset` (short fine-tuning, one stage, L2 on eval_dir, CPU).

        `extra_yaml` is a YAML mapping deep-merged into the spec: a mapping merges key by key, any other value replaces
        the default, and null removes the key (e.g. "search: {objectives: [accuracy, latency, size]}\\n"
        "evaluation: {tolerance: 100}\\noutput: {plots: true}"). Paths are written relative to the spec's folder.
        Returns the spec's path (folder/file_name).
        """
        from ruamel.yaml import YAML

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)

        def relative(path: Path) -> str:
            return Path(os.path.relpath(path, folder)).as_posix()

        spec: dict[str, Any] = {
            "qas": 1,
            "name": self.name,
            "model": relative(self.model),
            "calibration": {"folder": relative(self.calib_dir)},
            "evaluation": {"metric": "L2", "data": {"folder": relative(self.eval_dir)}},
            "search": {
                "preset": preset,
                "override": {key: dict(value) for key, value in SHORT_FINE_TUNING.items()},
                "sampler": "TPE",
                "seed": 0,
                "n_trials": n_trials,
                "two_stage": False,
            },
            "device": "cpu",
        }
        if extra_yaml.strip():
            extra = YAML(typ="safe", pure=True).load(extra_yaml)
            if not isinstance(extra, dict):
                raise ValueError(f"extra_yaml must be a YAML mapping, not {type(extra).__name__}")
            _merge(spec, extra)
        path = folder / file_name
        yaml = YAML()  # round-trip: keys stay in the order above
        yaml.default_flow_style = None  # flow style for the innermost collections, block for the rest
        with path.open("w", encoding="utf-8") as handle:
            handle.write(f"# zoo model {self.name}: written by tests/zoo.py\n")
            yaml.dump(spec, handle)
        return path


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def build(name: str, folder: Path, seed: int = 0, calib_samples: int = 8, eval_samples: int = 4) -> ZooModel:
    """Write zoo model `name` and its samples under folder (models/, data/<name>/calib, data/<name>/eval)."""
    if name not in BUILDERS:
        raise ValueError(f"no zoo model {name!r}; the zoo has {', '.join(ZOO)}")
    folder = Path(folder)
    rng = np.random.default_rng([seed, ZOO.index(name)])
    model, sample = BUILDERS[name](rng)
    model.ir_version = 6 if name == "opset11" else 8
    onnx.checker.check_model(model)
    models = folder / "models"
    models.mkdir(parents=True, exist_ok=True)
    path = models / f"{name}.onnx"
    if name == "external_data":
        data_file = models / f"{name}.onnx.data"
        data_file.unlink(missing_ok=True)  # onnx appends to an existing data file
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data_file.name, size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    data = folder / "data" / name
    for kind, count in (("calib", calib_samples), ("eval", eval_samples)):
        target = data / kind
        target.mkdir(parents=True, exist_ok=True)
        for old in target.iterdir():
            old.unlink()
        for i in range(count):
            arrays = sample(rng)
            if len(arrays) == 1:
                np.save(target / f"sample_{i:03d}.npy", next(iter(arrays.values())))
            else:
                _save_npz(target / f"sample_{i:03d}.npz", arrays)
    graph = model.graph
    initializers = {i.name for i in graph.initializer}
    weight_nodes = tuple(n.name for n in graph.node if n.op_type in WEIGHT_OPS and initializers & set(n.input[1:]))
    return ZooModel(name=name, model=path, calib_dir=data / "calib", eval_dir=data / "eval",
                    inputs=tuple(i.name for i in graph.input if i.name not in initializers),
                    outputs=tuple(o.name for o in graph.output), weight_nodes=weight_nodes)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """numpy.savez's layout (stored .npy members), with a fixed date in each entry so the bytes repeat."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


class _Graph:
    """Nodes and initializers collected while a builder writes a graph; seeded He-initialized weights."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, values: Any) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(values, np.float32), name))
        return name

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int, gain: float = 2.0) -> str:
        return self.const(name, self.rng.normal(0.0, (gain / fan_in) ** 0.5, size=shape))

    def bias(self, name: str, size: int) -> str:
        return self.const(name, self.rng.normal(0.0, 0.05, size=size))

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, name: str, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, bias: bool = True,
             w: str | None = None, b: str | None = None) -> str:
        w = w or self.weight(f"{name}.w", (cout, cin, k, k), cin * k * k)
        inputs = [x, w] + ([b or self.bias(f"{name}.b", cout)] if bias else [])
        return self.node("Conv", inputs, name, pads=[k // 2] * 4, strides=[stride, stride], kernel_shape=[k, k])

    def batchnorm(self, name: str, x: str, channels: int) -> str:
        rng = self.rng
        params = [self.const(f"{name}.scale", rng.uniform(0.8, 1.2, channels)),
                  self.const(f"{name}.bias", rng.normal(0.0, 0.1, channels)),
                  self.const(f"{name}.mean", rng.normal(0.0, 0.1, channels)),
                  self.const(f"{name}.var", rng.uniform(0.5, 1.5, channels))]
        return self.node("BatchNormalization", [x, *params], name, epsilon=1e-5)

    def head(self, name: str, x: str, cin: int, cout: int) -> str:
        pooled = self.node("GlobalAveragePool", [x], f"{name}_pool")
        flat = self.node("Flatten", [pooled], f"{name}_flatten")
        return self.node("Gemm", [flat, self.weight(f"{name}.w", (cout, cin), cin, 1.0), self.bias(f"{name}.b", cout)],
                         name, transB=1)

    def model(self, name: str, inputs: dict[str, list[int]], outputs: dict[str, list[int]], opset: int = 17
              ) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
            initializer=self.initializers)
        return helper.make_model(graph, producer_name="qas-zoo", opset_imports=[helper.make_opsetid("", opset)])


Sampler = Callable[[np.random.Generator], dict[str, np.ndarray]]


def _image(name: str, size: int) -> Sampler:
    return lambda rng: {name: rng.uniform(0.0, 1.0, size=(1, 3, size, size)).astype(np.float32)}


def resnet_bn(rng: np.random.Generator) -> tuple[onnx.ModelProto, Sampler]:
    g = _Graph(rng)
    x = g.node("Relu", [g.batchnorm("stem_bn", g.conv("stem_conv", "input", 3, 16, bias=False), 16)], "stem_relu")
    # block 1: identity shortcut
    y = g.node("Relu", [g.batchnorm("b1_bn1", g.conv("b1_conv1", x, 16, 16, bias=False), 16)], "b1_relu1")
    y = g.batchnorm("b1_bn2", g.conv("b1_conv2", y, 16, 16, bias=False), 16)
    x = g.node("Relu", [g.node("Add", [x, y], "b1_add")], "b1_relu2")
    # block 2: stride 2, projection shortcut (1x1 Conv + BN)
    y = g.node("Relu", [g.batchnorm("b2_bn1", g.conv("b2_conv1", x, 16, 32, stride=2, bias=False), 32)], "b2_relu1")
    y = g.batchnorm("b2_bn2", g.conv("b2_conv2", y, 32, 32, bias=False), 32)
    shortcut = g.batchnorm("b2_down_bn", g.conv("b2_down", x, 16, 32, k=1, stride=2, bias=False), 32)
    x = g.node("Relu", [g.node("Add", [shortcut, y], "b2_add")], "b2_relu2")
    g.head("fc", x, 32, 10)
    return g.model("resnet_bn", {"input": [1, 3, 32, 32]}, {"fc": [1, 10]}), _image("input", 32)


def detector(rng: np.random.Generator) -> tuple[onnx.ModelProto, Sampler]:
    g = _Graph(rng)

    def conv_silu(name: str, x: str, cin: int, cout: int, k: int = 3, stride: int = 1) -> str:
        c = g.conv(name, x, cin, cout, k, stride)
        return g.node("Mul", [c, g.node("Sigmoid", [c], f"{name}_sigmoid")], f"{name}_silu")

    c2 = conv_silu("stem", "images", 3, 16, stride=2)  # 16 x 16
    c3 = conv_silu("dark3", c2, 16, 32, stride=2)  # 8 x 8
    c4 = conv_silu("dark4", c3, 32, 32, stride=2)  # 4 x 4
    lateral = conv_silu("lateral", c4, 32, 16, k=1)
    up = g.node("Resize", [lateral, "", g.const("up.scales", [1.0, 1.0, 2.0, 2.0])], "upsample", mode="nearest")
    fused = g.node("Concat", [up, c3], "fpn_concat", axis=1)  # 48 x 8 x 8
    stem = conv_silu("head_stem", fused, 48, 32, k=1)
    cls_feat = conv_silu("cls_conv", stem, 32, 32)
    reg_feat = conv_silu("reg_conv", stem, 32, 32)
    g.node("Sigmoid", [g.conv("cls_pred", cls_feat, 32, 3, k=1)], "cls")
    g.conv("reg_pred", reg_feat, 32, 4, k=1)
    g.node("Sigmoid", [g.conv("obj_pred", reg_feat, 32, 1, k=1)], "obj")
    outputs = {"reg_pred": [1, 4, 8, 8], "obj": [1, 1, 8, 8], "cls": [1, 3, 8, 8]}
    return g.model("detector", {"images": [1, 3, 32, 32]}, outputs), _image("images", 32)


def transformer(rng: np.random.Generator) -> tuple[onnx.ModelProto, Sampler]:
    seq, dim, hidden = 16, 32, 64
    g = _Graph(rng)

    def layernorm(name: str, x: str) -> str:
        scale = g.const(f"{name}.scale", rng.uniform(0.9, 1.1, dim))
        return g.node("LayerNormalization", [x, scale, g.bias(f"{name}.bias", dim)], name, axis=-1, epsilon=1e-5)

    def linear(name: str, x: str, cin: int, cout: int) -> str:
        product = g.node("MatMul", [x, g.weight(f"{name}.w", (cin, cout), cin, 1.0)], name)
        return g.node("Add", [product, g.bias(f"{name}.b", cout)], f"{name}_add")

    h = layernorm("ln1", "tokens")
    q, k, v = (linear(n, h, dim, dim) for n in ("q_proj", "k_proj", "v_proj"))
    scores = g.node("MatMul", [q, g.node("Transpose", [k], "k_transpose", perm=[0, 2, 1])], "attn_scores")
    scaled = g.node("Mul", [scores, g.const("attn.scale", 1.0 / np.sqrt(dim))], "attn_scale")
    probs = g.node("Softmax", [scaled], "attn_softmax", axis=-1)
    attended = g.node("MatMul", [probs, v], "attn_context")
    x = g.node("Add", ["tokens", linear("out_proj", attended, dim, dim)], "residual1")
    h = linear("fc1", layernorm("ln2", x), dim, hidden)
    erf = g.node("Erf", [g.node("Mul", [h, g.const("gelu.rsqrt2", 1.0 / np.sqrt(2.0))], "gelu_div")], "gelu_erf")
    gate = g.node("Mul", [g.node("Add", [erf, g.const("gelu.one", 1.0)], "gelu_add"), g.const("gelu.half", 0.5)],
                  "gelu_half")
    gelu = g.node("Mul", [h, gate], "gelu")
    g.node("Add", [x, linear("fc2", gelu, hidden, dim)], "residual2")

    def sample(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {"tokens": r.normal(0.0, 1.0, size=(1, seq, dim)).astype(np.float32)}

    return g.model("transformer", {"tokens": [1, seq, dim]}, {"residual2": [1, seq, dim]}), sample


def shared_init(rng: np.random.Generator) -> tuple[onnx.ModelProto, Sampler]:
    g = _Graph(rng)
    w1, b1 = g.weight("shared.conv1.w", (16, 3, 3, 3), 27), g.bias("shared.conv1.b", 16)
    w2, b2 = g.weight("shared.conv2.w", (16, 16, 3, 3), 144), g.bias("shared.conv2.b", 16)
    branches = []
    for side in ("left", "right"):  # one siamese tower per input, both on the same initializers
        x = g.node("Relu", [g.conv(f"{side}_conv1", side, 3, 16, w=w1, b=b1)], f"{side}_relu1")
        branches.append(g.node("Relu", [g.conv(f"{side}_conv2", x, 16, 16, stride=2, w=w2, b=b2)], f"{side}_relu2"))
    fused = g.node("Concat", branches, "towers_concat", axis=1)
    g.head("fc", fused, 32, 10)

    def sample(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {side: r.uniform(0.0, 1.0, size=(1, 3, 16, 16)).astype(np.float32) for side in ("left", "right")}

    return g.model("shared_init", {"left": [1, 3, 16, 16], "right": [1, 3, 16, 16]}, {"fc": [1, 10]}), sample


def external_data(rng: np.random.Generator) -> tuple[onnx.ModelProto, Sampler]:
    g = _Graph(rng)
    x = g.node("Relu", [g.conv("conv1", "input", 3, 16)], "relu1")
    x = g.node("Relu", [g.conv("conv2", x, 16, 32, stride=2)], "relu2")
    x = g.node("Relu", [g.conv("conv3", x, 32, 32)], "relu3")
    g.head("fc", x, 32, 10)
    return g.model("external_data", {"input": [1, 3, 32, 32]}, {"fc": [1, 10]}), _image("input", 32)


def opset11(rng: np.random.Generator) -> tuple[onnx.ModelProto, Sampler]:
    g = _Graph(rng)
    low, high = g.const("clip.min", 0.0), g.const("clip.max", 6.0)  # Clip's bounds are inputs since opset 11
    x = g.node("Clip", [g.conv("conv1", "input", 3, 16), low, high], "relu6_1")
    x = g.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Clip", [g.conv("conv2", x, 16, 32), low, high], "relu6_2")
    g.head("fc", x, 32, 10)
    return g.model("opset11", {"input": [1, 3, 32, 32]}, {"fc": [1, 10]}, opset=11), _image("input", 32)


BUILDERS: dict[str, Callable[[np.random.Generator], tuple[onnx.ModelProto, Sampler]]] = {
    "resnet_bn": resnet_bn, "detector": detector, "transformer": transformer, "shared_init": shared_init,
    "external_data": external_data, "opset11": opset11,
}
assert tuple(BUILDERS) == ZOO
