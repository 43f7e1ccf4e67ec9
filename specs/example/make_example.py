"""Build the example's model and samples deterministically: no arguments in; models/tinycnn.onnx and data/ out.

A 3x32x32 image classifier (two Conv+Relu, global pooling, Gemm to 10 classes) with seeded
weights, plus seeded calibration and evaluation samples as .npy files. Re-running writes the
same bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
CALIBRATION_SAMPLES = 8
EVALUATION_SAMPLES = 4


def build_model(rng: np.random.Generator) -> onnx.ModelProto:
    def weight(name: str, shape: tuple[int, ...], fan_in: int) -> onnx.TensorProto:
        values = rng.normal(0.0, (2.0 / fan_in) ** 0.5, size=shape).astype(np.float32)
        return numpy_helper.from_array(values, name)

    initializers = [
        weight("conv1.w", (16, 3, 3, 3), 27),
        numpy_helper.from_array(np.zeros(16, np.float32), "conv1.b"),
        weight("conv2.w", (32, 16, 3, 3), 144),
        numpy_helper.from_array(np.zeros(32, np.float32), "conv2.b"),
        weight("fc.w", (10, 32), 32),
        numpy_helper.from_array(np.zeros(10, np.float32), "fc.b"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="pool"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tinycnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=initializers,
    )
    model = helper.make_model(graph, producer_name="qas-example", opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write_samples(folder: Path, count: int, rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        sample = rng.uniform(0.0, 1.0, size=(1, 3, 32, 32)).astype(np.float32)
        np.save(folder / f"sample_{i:03d}.npy", sample)


def main() -> None:
    rng = np.random.default_rng(20261202)
    (HERE / "models").mkdir(exist_ok=True)
    onnx.save(build_model(rng), str(HERE / "models" / "tinycnn.onnx"))
    write_samples(HERE / "data" / "calib", CALIBRATION_SAMPLES, rng)
    write_samples(HERE / "data" / "eval", EVALUATION_SAMPLES, rng)


if __name__ == "__main__":
    main()
