"""Benchmark: hostile specs refused by the loader, side by side with loading a normal spec: no arguments in; a table
of medians and ratios out.

Cases (compiler/front/yaml_limits.py sets the limits): the example spec (the baseline, loaded in full),
billion laughs (9 levels x 9 aliases), 5000 nested `[`, 5000 nested flow mappings, 200 nested
block mappings, a self-containing alias, a flat list one node past the node budget (the
slowest refusal: ruamel must read MAX_NODES nodes first) and a 50 MB file. Two measures:
  in-process   compiler.front.source.load(spec), median of RUNS runs per case (cases alternate);
  cli          `python -m compiler validate --format json --target-env golden/target_env.json spec`
               in a fresh interpreter, median of CLI_RUNS: start-up and imports on every side, and
               for the example the whole pipeline (no probe subprocess: the target is a file).
The machine is shared and noisy: read the ratios, not the absolute milliseconds. Exits 1 when a
hostile case is not refused with the expected code or the loader raises.

  .venv/bin/python bench/yaml_limits.py
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.front import yaml_limits  # noqa: E402 - importable only once the repository is on sys.path
from compiler.front.source import load  # noqa: E402

RUNS = 9
CLI_RUNS = 3
EXAMPLE = REPO / "specs" / "example"


def laughs() -> str:
    lines = ["qas: 1", "name: laughs", f"l0: &l0 [{', '.join(['lol'] * 9)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join([*lines, "search: {preset: *l8}"]) + "\n"


def write_50mb(spec: Path) -> None:
    with spec.open("w", encoding="utf-8") as handle:
        handle.write("qas: 1\nname: big\n")
        line = "# " + "x" * 97 + "\n"
        handle.write(line * (50 * 1024 * 1024 // len(line)))


def text_writer(text: str) -> Callable[[Path], None]:
    return lambda spec: spec.write_text(text, encoding="utf-8")


CASES: list[tuple[str, Callable[[Path], None], str | None]] = [  # name, writer, expected code
    ("example spec (loaded)", lambda spec: shutil.copy(EXAMPLE / "spec.yaml", spec), None),
    ("billion laughs 9x9", text_writer(laughs()), "QAS106"),
    ("5000 nested [", text_writer("qas: 1\nx: " + "[" * 5000 + "1" + "]" * 5000 + "\n"), "QAS105"),
    ("5000 nested {a:", text_writer("qas: 1\nx: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n"), "QAS105"),
    ("200 nested block maps",
     text_writer("".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n"), "QAS105"),
    ("self-containing alias", text_writer("qas: 1\na: &a {x: [*a]}\n"), "QAS106"),
    (f"flat list of {yaml_limits.MAX_NODES} items",
     text_writer("qas: 1\nx: [" + ", ".join(["1"] * yaml_limits.MAX_NODES) + "]\n"), "QAS106"),
    ("50 MB spec", write_50mb, "QAS104"),
]


def in_process(specs: dict[str, Path]) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in specs}
    for _ in range(RUNS):
        for name, spec in specs.items():  # alternate so that machine noise hits every case alike
            start = time.perf_counter()
            load(spec)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def cli(specs: dict[str, Path]) -> dict[str, float]:
    base = [sys.executable, "-m", "compiler", "validate", "--format", "json",
            "--target-env", str(REPO / "golden" / "target_env.json")]
    commands = {name: [*base, str(spec)] for name, spec in specs.items()}
    times: dict[str, list[float]] = {name: [] for name in specs}
    for _ in range(CLI_RUNS):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, cwd=REPO, timeout=600, check=False)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> int:
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "example"
        shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("autosearch_output", "__pycache__"))
        specs: dict[str, Path] = {}
        for i, (name, writer, code) in enumerate(CASES):
            spec = work / f"case{i}.yaml"
            writer(spec)
            specs[name] = spec
            _doc, found = load(spec)
            got = [d.code for d in found]
            want = [] if code is None else [code]
            if got != want:
                print(f"{name}: expected {want}, got {got}", file=sys.stderr)
                failed = True
            elif found:
                d = found[0]
                print(f"{name:24s} -> {spec.name}:{d.line}:{d.col}: error[{d.code}]: {d.message}")
        loads = in_process(specs)
        runs = cli(specs)
        baseline = next(iter(specs))
        print()
        print(f"{'case':24s} {'load (median)':>14s} {'x example':>10s} {'cli (median)':>13s} {'x example':>10s}")
        for name in specs:
            print(f"{name:24s} {loads[name] * 1000:11.1f} ms {loads[name] / loads[baseline]:10.2f}"
                  f" {runs[name] * 1000:10.0f} ms {runs[name] / runs[baseline]:10.2f}")
        print(f"\nin-process: median of {RUNS}; cli: median of {CLI_RUNS} fresh interpreters "
              f"(for the example: the whole validate pipeline)")
        print(json.dumps({"limits": {"max_bytes": yaml_limits.MAX_BYTES, "max_depth": yaml_limits.MAX_DEPTH,
                                     "max_nodes": yaml_limits.MAX_NODES}}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
