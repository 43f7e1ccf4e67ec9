"""Shared test helpers: the --update-golden flag, paths, fixtures and the helpers more than one test module uses.

A helper that a second test module needs lives here; test modules import only from .conftest,
never from each other (tests/test_layout.py checks it).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.environment import Environment, load_target

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = REPO / "specs" / "example"
GOLDEN = REPO / "golden"

# Tests that run amd-quark carry the `e2e` marker (pyproject.toml; tests/test_layout.py checks it) and skip where it
# is not installed. Checked without importing it: `import quark.onnx` imports torch and builds Quark's custom ops,
# which collecting the e2e modules for `pytest -m "not e2e"` must not pay for.
needs_quark = pytest.mark.skipif(importlib.util.find_spec("quark") is None, reason="amd-quark is not installed")

# Quark builds its custom ops into torch's extension cache, by default one folder per user and Python version, and a
# build records the absolute paths of the venv it was made in: two venvs on one machine (a checkout's and a CI clone's)
# then rebuild it in turn, about 30 s at every switch. The tests (and the scripts they start) keep one per interpreter.
if "TORCH_EXTENSIONS_DIR" not in os.environ:
    _cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    _key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    os.environ["TORCH_EXTENSIONS_DIR"] = str(_cache / "torch_extensions" / f"qas-tests-{_key}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden/*/expected from the compiler")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of specs/example (spec, model, samples; no outputs) to compile and run in."""
    target = tmp_path / "example"
    shutil.copytree(EXAMPLE_DIR, target, ignore=shutil.ignore_patterns("autosearch_output", "__pycache__"))
    return target


def model_with_external_data(folder: Path, data_bytes: int, missing: bool = False) -> Path:
    """The example model plus one initializer stored in a sparse external file of data_bytes (no real disk used)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"))
    tensor = numpy_helper.from_array(__import__("numpy").zeros(4, "float32"), "unused.weight")
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "big.onnx_data"), ("offset", "0"), ("length", "16")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    model.graph.initializer.append(tensor)
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())
    if not missing:
        with open(folder / "big.onnx_data", "wb") as handle:
            handle.truncate(data_bytes)
    return path


def settings_from_script(text: str, script: Path) -> Any:
    """A compiled settings script's text in; its runtime Settings (as compiler.runtime's class) out, without running it."""
    from compiler.runtime.settings import Settings

    call = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Settings")
    values = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg != "script"}
    return Settings(script=str(script), **values)


def target_env(case_dir: Path) -> Environment:
    """The case's own target_env.json, else golden/target_env.json: golden output never depends on this machine."""
    own = case_dir / "target_env.json"
    env = load_target(own if own.is_file() else GOLDEN / "target_env.json")
    assert not isinstance(env, str), env
    return env


def qas(*args: str, cwd: Path | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`qas <args>` in a subprocess with this interpreter, output captured as text (TimeoutExpired past timeout)."""
    return subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def compile_and_run(spec: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """`qas compile spec`, then run the script it wrote; both must succeed. Returns the output folder and the run."""
    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    out = spec.parent / "autosearch_output"
    script = next(out.glob("*_autosearch.py"))
    return out, run_script(script)


def run_script(script: Path) -> subprocess.CompletedProcess:
    """Run a compiled search script from its spec's folder; it must exit 0 (the tails of its output say why not)."""
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=script.parent.parent)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return ran


def qdq_model(path: Path) -> Path:
    """The example model quantized to QDQ by onnxruntime's quantize_static (an already-quantized model to refuse)."""
    import numpy as np

    quantization = pytest.importorskip("onnxruntime.quantization")

    class Samples(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.samples = [{"input": np.load(p)} for p in sorted((EXAMPLE_DIR / "data" / "calib").glob("*.npy"))]

        def get_next(self):
            return self.samples.pop() if self.samples else None

    quantization.quantize_static(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"), str(path), Samples(),
                                 quant_format=quantization.QuantFormat.QDQ)
    return path
