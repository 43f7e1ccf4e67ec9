"""The plan's time estimate against real runs on the test zoo's models (out of sample: bench/cost_model.py fits on
other models): zoo model names in (default all); per model and preset, the plan's range, the wall time of the
compiled script and the ratio of the range's middle to it out (a table; target within 2x).

Each model is built by tests/zoo.py in a temp folder, its spec written with the zoo's short fine-tuning
(`ZooModel.write_spec`, 3 trials, one stage, --iterations of AdaRound/AdaQuant), compiled with
`python -m compiler compile`, and the script run as a subprocess, timed from start to exit. The machine's load
average is printed beside each run.

  .venv/bin/python bench/zoo_estimates.py [--preset XINT8_SEARCH] [--trials 3] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.zoo import ZOO, build  # noqa: E402 - the repo's own test zoo, importable once REPO is on the path


def measure(name: str, preset: str, trials: int, iterations: int, work: Path) -> dict[str, float]:
    """One zoo model compiled and run; the plan's range (s), the real wall time (s) and the load out."""
    zm = build(name, work / name)
    steps = f"{{type: int, low: {iterations // 2}, high: {iterations}, step: {iterations // 2}}}"
    spec = zm.write_spec(work / name, preset=preset, n_trials=trials, extra_yaml=(
        f"search: {{override: {{adaround_params: {{num_iterations: {steps}}}, "
        f"adaquant_params: {{num_iterations: {steps}}}}}}}\n"))
    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True,
                              text=True, cwd=REPO)
    if compiled.returncode != 0:
        raise SystemExit(f"{name}: compile failed:\n{compiled.stdout}{compiled.stderr}")
    out = spec.parent / "autosearch_output"
    low, high = json.loads((out / "quant_plan.json").read_text())["time_estimate"]["total_s"]
    script = next(out.glob("*_autosearch.py"))
    load = os.getloadavg()[0]
    started = time.monotonic()
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=spec.parent)
    wall = time.monotonic() - started
    if ran.returncode != 0:
        raise SystemExit(f"{name}: the search failed:\n{ran.stdout[-2000:]}{ran.stderr[-2000:]}")
    return {"low": low, "high": high, "wall": wall, "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--preset", default="XINT8_SEARCH")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=50, help="AdaRound/AdaQuant iterations (high end)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qas-zoo-estimates-") as folder:
        print(f"{'model':<14} {'plan (s)':>14} {'actual (s)':>10} {'middle/actual':>13}  load")
        for name in args.names or ZOO:
            m = measure(name, args.preset, args.trials, args.iterations, Path(folder))
            middle = (m["low"] + m["high"]) / 2
            print(f"{name:<14} {m['low']:>6.1f}-{m['high']:<7.1f} {m['wall']:>10.1f} {middle / m['wall']:>13.2f}  "
                  f"{m['load']:.2f}", flush=True)


if __name__ == "__main__":
    main()
