"""What the generated script needs at run time: a Spec in, requirement ranges and install commands out.

These are ranges, never the versions found on some machine, so compiled output is the same
everywhere; the environment pass checks them against what the target interpreter has.
"""

from __future__ import annotations

import shlex

from compiler.front.model import ReaderSpec, Spec

PYTHON_RANGE = ">=3.10"

REQUIREMENTS = {
    "amd-quark": ">=0.13,<0.14",
    "optuna": ">=4.0,<6",
    "onnxruntime": ">=1.17",
    "onnx": ">=1.16",
    "numpy": ">=1.24",
    "torch": ">=2.1",
}
PLOT_REQUIREMENTS = {"plotly": ">=5"}
IMAGE_REQUIREMENTS = {"pillow": ">=10"}  # the image reader decodes and resizes with Pillow
BLOCK_REQUIREMENTS = {"google-re2": ">=1.1"}  # keep_float.blocks patterns are matched with RE2 (linear time)
TRACKING_REQUIREMENTS = {"mlflow-skinny": ">=3.1,<4"}  # output.mlflow (the full mlflow distribution provides it too)

# torch wheels per accelerator: the default PyPI wheel is a CUDA build on Linux.
TORCH_INDEX = {
    "cpu": "https://download.pytorch.org/whl/cpu",
    "cuda": "https://download.pytorch.org/whl/cu124",
    "rocm": "https://download.pytorch.org/whl/rocm6.2",
}
# The onnxruntime distribution that carries each accelerator's execution provider.
ORT_DISTRIBUTION = {"cpu": "onnxruntime", "cuda": "onnxruntime-gpu", "rocm": "onnxruntime-rocm"}
ORT_PROVIDERS = {"cuda": ("CUDAExecutionProvider",), "rocm": ("ROCMExecutionProvider", "MIGraphXExecutionProvider")}


def image_readers(spec: Spec) -> list[ReaderSpec]:
    """The spec's readers that read an image folder (calibration first)."""
    return [r for r in (spec.calibration, spec.evaluation.data) if r is not None and r.images is not None]


def requirements(spec: Spec) -> dict[str, str]:
    """Distribution name -> version range, for this spec (plotly only when plots are on, pillow only with images,
    google-re2 only with keep_float.blocks, mlflow-skinny only with output.mlflow)."""
    return (dict(REQUIREMENTS) | (PLOT_REQUIREMENTS if spec.output.plots else {})
            | (IMAGE_REQUIREMENTS if image_readers(spec) else {})
            | (BLOCK_REQUIREMENTS if spec.keep_float.blocks else {})
            | (TRACKING_REQUIREMENTS if spec.output.mlflow else {}))


def accelerator_of(device: str) -> str:
    """'cpu', 'cuda' or 'rocm' from a spec device ('cuda:1' -> 'cuda')."""
    return device.split(":", 1)[0]


def install_command(python: str, package: str, version_range: str, accelerator: str) -> str:
    """The exact pip command that installs `package` within `version_range` for that accelerator."""
    if package == "torch":
        words = [python, "-m", "pip", "install", f"torch{version_range}", "--index-url", TORCH_INDEX[accelerator]]
    elif package == "onnxruntime":
        words = [python, "-m", "pip", "install", f"{ORT_DISTRIBUTION[accelerator]}{version_range}"]
    else:
        words = [python, "-m", "pip", "install", f"{package}{version_range}"]
    return " ".join(shlex.quote(w) for w in words)  # the interpreter's path may hold spaces or quotes
