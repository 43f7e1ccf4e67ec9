"""Models for the cost benchmark: a name and a folder in; models/<name>.onnx and data/calib, data/eval (.npy) out.

Built with onnx.helper and seeded numpy weights at bench time (never committed). Same arguments, same bytes.
- resnetish: a 3x64x64 input, a two-conv stem, four stages of two residual blocks (widths 24, 48, 96,
  192; the first block of stages 2-4 halves the resolution and has a 1x1 projection), global pooling
  and a Gemm to 10 classes: 21 Conv + 1 Gemm, 50 nodes, about 1.6 M weights (6.3 MB).
- resnetwide: resnetish with widths 40, 80, 160, 320: the same 50 nodes, about 4.4 M weights.
- detector: a 3x160x160 input, a stride-2 stem and three stride-2 stages (widths 32, 64, 128, two 3x3 convs each), a
  small feature pyramid (1x1 laterals, nearest Resize x2, Concat) and a 3x3 + 1x1 head with Sigmoid on the 40x40
  map: 14 Conv, 0.5 M weights (2 MB) at a high resolution, so compute per MB is far above resnetish's.
- widemlp: a 1024-wide input through Gemm layers 1024 -> 2048 -> 2048 -> 1024 -> 10 with Relu between:
  few nodes (7) and many bytes (8.4 M weights, 34 MB), to tell per-node costs from per-byte ones.

  .venv/bin/python bench/make_models.py NAME DIR [--calib 16] [--eval 8]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIZE = 64
WIDTHS = (24, 48, 96, 192)
WIDE_WIDTHS = (40, 80, 160, 320)  # resnetwide
BLOCKS = 2


class Builder:
    """Collects nodes and seeded initializers while the graph is laid out."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def conv(self, name: str, x: str, c_in: int, c_out: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w = self.rng.normal(0.0, (2.0 / (c_in * k * k)) ** 0.5, size=(c_out, c_in, k, k)).astype(np.float32)
        b = self.rng.normal(0.0, 0.01, size=c_out).astype(np.float32)
        self.initializers += [numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(b, f"{name}.b")]
        pad = k // 2
        self.nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name,
                                           pads=[pad] * 4, strides=[stride, stride]))
        if not relu:
            return name
        self.nodes.append(helper.make_node("Relu", [name], [f"{name}.relu"], name=f"{name}_relu"))
        return f"{name}.relu"

    def block(self, name: str, x: str, c_in: int, c_out: int, stride: int) -> str:
        y = self.conv(f"{name}_a", x, c_in, c_out, 3, stride)
        y = self.conv(f"{name}_b", y, c_out, c_out, 3, relu=False)
        shortcut = x if stride == 1 and c_in == c_out else self.conv(f"{name}_proj", x, c_in, c_out, 1, stride,
                                                                     relu=False)
        self.nodes.append(helper.make_node("Add", [y, shortcut], [f"{name}.add"], name=f"{name}_add"))
        self.nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"], name=f"{name}_relu"))
        return f"{name}.out"


def resnetish(rng: np.random.Generator, widths: tuple[int, ...] = WIDTHS) -> tuple[
        list[onnx.NodeProto], list[onnx.TensorProto], list[int]]:
    g = Builder(rng)
    x = g.conv("stem1", "input", 3, widths[0], 3)
    x = g.conv("stem2", x, widths[0], widths[0], 3)
    c_in = widths[0]
    for s, width in enumerate(widths):
        for b in range(BLOCKS):
            x = g.block(f"s{s}b{b}", x, c_in, width, 2 if s > 0 and b == 0 else 1)
            c_in = width
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    fc = rng.normal(0.0, (1.0 / c_in) ** 0.5, size=(10, c_in)).astype(np.float32)
    g.initializers += [numpy_helper.from_array(fc, "fc.w"), numpy_helper.from_array(np.zeros(10, np.float32), "fc.b")]
    g.nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    return g.nodes, g.initializers, [1, 3, SIZE, SIZE]


def widemlp(rng: np.random.Generator) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[int]]:
    widths = (1024, 2048, 2048, 1024, 10)
    nodes, initializers, x = [], [], "input"
    for i, (c_in, c_out) in enumerate(itertools.pairwise(widths)):
        w = rng.normal(0.0, (2.0 / c_in) ** 0.5, size=(c_out, c_in)).astype(np.float32)
        initializers += [numpy_helper.from_array(w, f"fc{i}.w"),
                         numpy_helper.from_array(np.zeros(c_out, np.float32), f"fc{i}.b")]
        last = i == len(widths) - 2
        y = "logits" if last else f"fc{i}"
        nodes.append(helper.make_node("Gemm", [x, f"fc{i}.w", f"fc{i}.b"], [y], name=f"fc{i}", transB=1))
        if not last:
            nodes.append(helper.make_node("Relu", [y], [f"{y}.relu"], name=f"fc{i}_relu"))
            x = f"{y}.relu"
    return nodes, initializers, [1, widths[0]]


def detector(rng: np.random.Generator) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[int]]:
    g = Builder(rng)
    x = g.conv("stem", "input", 3, 16, 3, 2)
    feats, c_in = [], 16
    for s, width in enumerate((32, 64, 128)):
        x = g.conv(f"s{s}a", x, c_in, width, 3, 2)
        x = g.conv(f"s{s}b", x, width, width, 3)
        feats.append((x, width))
        c_in = width
    (p3, c3), (p4, c4), (p5, c5) = feats
    top = g.conv("lat5", p5, c5, 64, 1, relu=False)
    g.initializers.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up.scales"))
    for level, (name, c) in (("4", (p4, c4)), ("3", (p3, c3))):
        g.nodes.append(helper.make_node("Resize", [top, "", "up.scales"], [f"up{level}"], name=f"up{level}",
                                        mode="nearest"))
        lateral = g.conv(f"lat{level}", name, c, 64, 1, relu=False)
        g.nodes.append(helper.make_node("Concat", [f"up{level}", lateral], [f"cat{level}"], name=f"cat{level}", axis=1))
        top = g.conv(f"fuse{level}", f"cat{level}", 128, 64, 3)
    y = g.conv("head", top, 64, 64, 3)
    y = g.conv("pred", y, 64, 10, 1, relu=False)
    g.nodes.append(helper.make_node("Sigmoid", [y], ["scores"], name="sigmoid"))
    g.nodes.append(helper.make_node("GlobalAveragePool", ["scores"], ["pooled"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["pooled"], ["logits"], name="flatten"))
    return g.nodes, g.initializers, [1, 3, DETECTOR_SIZE, DETECTOR_SIZE]


DETECTOR_SIZE = 160
def resnetwide(rng: np.random.Generator) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[int]]:
    return resnetish(rng, WIDE_WIDTHS)


BUILDERS = {"resnetish": resnetish, "resnetwide": resnetwide, "detector": detector, "widemlp": widemlp}


def build_model(name: str, rng: np.random.Generator) -> tuple[onnx.ModelProto, list[int]]:
    nodes, initializers, shape = BUILDERS[name](rng)
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
                              initializer=initializers)
    model = helper.make_model(graph, producer_name="qas-bench", opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, shape


def write_samples(folder: Path, count: int, shape: list[int], rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        np.save(folder / f"sample_{i:03d}.npy", rng.uniform(0.0, 1.0, size=shape).astype(np.float32))


def make(name: str, root: Path, calib: int = 16, evaluation: int = 8, seed: int = 20261203) -> Path:
    """Write the model and samples under root; the model's path out."""
    rng = np.random.default_rng(seed)
    (root / "models").mkdir(parents=True, exist_ok=True)
    model_path = root / "models" / f"{name}.onnx"
    model, shape = build_model(name, rng)
    onnx.save(model, str(model_path))
    write_samples(root / "data" / "calib", calib, shape, rng)
    write_samples(root / "data" / "eval", evaluation, shape, rng)
    return model_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(BUILDERS))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--calib", type=int, default=16)
    parser.add_argument("--eval", type=int, default=8)
    args = parser.parse_args()
    model = make(args.name, args.dir, args.calib, args.eval)
    print(f"{model} ({model.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
