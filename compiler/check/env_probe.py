"""Environment probe, run as a script in the interpreter that will run the search: nothing in, one JSON object out.

Standard library only, and it imports none of the probed packages except onnxruntime (its
execution providers are known only to the library itself). torch's build (CPU, CUDA or ROCm) is
read from torch/version.py without importing torch. The JSON is an env_context document (Quark's
contract: `environment` and `hardware`) with qas's facts added under `environment`.
"""

import ast
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys

PACKAGES = ("amd-quark", "optuna", "onnxruntime", "onnx", "numpy", "torch", "plotly", "pillow", "matplotlib",
            "google-re2", "mlflow-skinny")
# The import name of each distribution, and the alternative distributions that provide it.
MODULES = {"amd-quark": "quark", "onnxruntime": "onnxruntime", "pillow": "PIL", "google-re2": "re2",
           "mlflow-skinny": "mlflow"}
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-rocm", "onnxruntime-migraphx",
                     "onnxruntime-directml", "onnxruntime-openvino", "onnxruntime-vitisai")


def version_of(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def packages():
    found = {}
    for name in PACKAGES:
        module = MODULES.get(name, name)
        version = version_of(name)
        if name == "onnxruntime" and version is None:
            version = next((v for v in map(version_of, ORT_DISTRIBUTIONS) if v), None)
        if name == "mlflow-skinny" and version is None:
            version = version_of("mlflow")  # the full distribution provides the same module
        found[name] = version if version is not None and importable(module) else None
    return found


def onnxruntime_providers():
    if not importable("onnxruntime"):
        return []
    try:
        import onnxruntime
        return list(onnxruntime.get_available_providers())
    except Exception as error:  # noqa: BLE001 - a broken install: report it, the compiler decides
        return ["<import failed: %s>" % type(error).__name__]


def torch_build():
    """'cpu', 'cuda' or 'rocm' from torch/version.py (no import), or None without torch."""
    spec = importlib.util.find_spec("torch") if importable("torch") else None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    values = {}
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        target = getattr(node, "target", None) or (node.targets[0] if getattr(node, "targets", None) else None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            try:
                values[target.id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    if values.get("hip"):
        return "rocm"
    if values.get("cuda"):
        return "cuda"
    return "cpu"


def accelerator(providers, build):
    if build == "rocm" and ("ROCMExecutionProvider" in providers or "MIGraphXExecutionProvider" in providers):
        return "amd-rocm"
    if build == "cuda" and "CUDAExecutionProvider" in providers:
        return "nvidia-cuda"
    return "cpu"


def main():
    providers = onnxruntime_providers()
    build = torch_build()
    document = {
        "environment": {
            "os": platform.system().lower(),
            "python": platform.python_version(),
            "containerized": os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"),
            "executable": sys.executable,
            "packages": packages(),
            "onnxruntime_providers": providers,
            "torch_build": build,
        },
        "hardware": {"accelerator": accelerator(providers, build)},
    }
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
