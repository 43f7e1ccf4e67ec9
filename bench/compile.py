"""Benchmark: `qas compile` of the example against `python -c "import onnx; onnx.load(model)"`, side by side.

No arguments in; prints the median wall time of each (N alternating runs, fresh processes) and
their ratio. Target: ratio <= 1.3. Both commands start a new interpreter, so start-up is counted
on both sides.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "specs" / "example"
RUNS = 15
TARGET = 1.3


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "example"
        shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("autosearch_output"))
        model = work / "models" / "tinycnn.onnx"
        compile_cmd = [sys.executable, "-m", "compiler", "compile", "--force", str(work / "spec.yaml")]
        load_cmd = [sys.executable, "-c", f"import onnx; onnx.load({str(model)!r})"]
        timed(compile_cmd), timed(load_cmd)  # warm the file cache and .pyc files
        compile_times, load_times = [], []
        for _ in range(RUNS):  # alternate so that machine noise hits both sides alike
            compile_times.append(timed(compile_cmd))
            load_times.append(timed(load_cmd))
    c, load = statistics.median(compile_times), statistics.median(load_times)
    ratio = c / load
    print(f"qas compile example : median {c * 1000:.0f} ms over {RUNS} runs")
    print(f"onnx.load(model)    : median {load * 1000:.0f} ms over {RUNS} runs")
    print(f"ratio compile/load  : {ratio:.2f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
