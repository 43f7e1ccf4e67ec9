"""Benchmark: keep_float.search strategies side by side, on zoo models with the same data, loss and tolerance: flags
in, a table (or JSON) out.

Per model (tests/zoo.py: resnet_bn, a BatchNorm-folded ResNet-style CNN, and detector, a detector head) and strategy
(accuracy_control; top_k over every prefix length with TPE; granular; partitioned with 2 sections), one search run as
a user would (`python -m compiler run spec.yaml --yes`, then `qas report --format json`): XInt8 activations and
weights with MinMax calibration (one configuration, so only what stays float varies), the L2 distance from the float
model's outputs on the evaluation samples as the loss, evaluation.tolerance per model, objectives accuracy and
quantized_fraction (the winner: the most quantized within tolerance). Columns:

  trials      sampler trials run (accuracy_control stops once its answer is proven; the others run --trials, top_k
              at most its groups + 1 distinct choices)
  to_tol      the first trial (1-based) whose model is within tolerance, or '-' when none is
  float       nodes the winner keeps float (beyond the fixed keep_float), and their share of the ranked nodes
  within      whether the winner is within tolerance
  wall_s      the run's wall time (a shared machine: compare within one run)

About 10 minutes on 2 cores with the defaults.

  .venv/bin/python bench/strategies.py [--models resnet_bn,detector] [--trials 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.zoo import build  # noqa: E402 - the repo's test zoo, importable once REPO is on the path

TOLERANCE = {"resnet_bn": 0.1, "detector": 0.05}  # L2 from the float outputs; the fully quantized model is outside
ACCURACY_CONTROL_CAP = 60  # its n_trials: a cap it should not reach
SPACE = """
search:
  preset: null
  override: null
  sampler: TPE
  two_stage: false
  n_trials: {n_trials}
  objectives: [accuracy, quantized_fraction]
  space:
    activation: [XInt8Spec]
    activation_params: {{symmetric: [true], calibration_method: [MinMax], only_if: activation}}
    weight: [XInt8Spec]
    weight_params: {{symmetric: [true], only_if: weight}}
evaluation: {{tolerance: {tolerance}}}
keep_float:
  sensitivity: {{method: L2, samples: 8}}
  search: {search}
"""


def run(folder: Path, model: str, search: str, n_trials: int) -> dict[str, Any]:
    """One search of `model` with keep_float.search `search`; the report JSON, best_config.json, sensitivity.json and
    the wall time out."""
    zm = build(model, folder)
    zm.write_spec(folder, extra_yaml=SPACE.format(n_trials=n_trials, tolerance=TOLERANCE[model], search=search))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "compiler", "run", "spec.yaml", "--yes"], cwd=folder,
                          capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{model} {search}: the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    report = subprocess.run([sys.executable, "-m", "compiler", "report", "autosearch_output", "--format", "json"],
                            cwd=folder, capture_output=True, text=True, timeout=600)
    out = folder / "autosearch_output"
    return {"report": json.loads(report.stdout), "best": json.loads((out / "best_config.json").read_text()),
            "sensitivity": json.loads((out / "sensitivity.json").read_text()), "wall_s": wall}


def summary(model: str, strategy: str, found: dict[str, Any]) -> dict[str, Any]:
    """The columns of one run."""
    tolerance = TOLERANCE[model]
    sampler = sorted((t for t in found["report"]["all_trials"] if t["stage"] == "sampler"
                      and t["state"] == "COMPLETE"), key=lambda t: t["number"])
    first = next((k for k, t in enumerate(sampler, 1) if t["value"] <= tolerance), None)
    ranked = {n for g in found["sensitivity"]["groups"] for n in g["nodes"]}
    kept = found["best"].get("keep_float") or {}
    floated = len(kept.get("nodes") or [])
    return {"model": model, "strategy": strategy, "groups": len(found["sensitivity"]["groups"]),
            "trials": len(sampler), "to_tolerance": first, "float_nodes": floated,
            "float_share": round(floated / max(len(ranked), 1), 3), "within": found["best"]["value"] <= tolerance,
            "value": found["best"]["value"], "choice": kept.get("choice"), "wall_s": round(found["wall_s"], 1)}


def bench_model(model: str, trials: int, work: Path) -> list[dict[str, Any]]:
    """accuracy_control first (its ranking gives the group count top_k lists), then the sampled strategies."""
    rows = []
    control = run(work / model / "accuracy_control", model, "{strategy: accuracy_control}", ACCURACY_CONTROL_CAP)
    rows.append(summary(model, "accuracy_control", control))
    groups = len(control["sensitivity"]["groups"])
    for strategy, search, cap in (("top_k (TPE)", f"{{top_k: {list(range(groups + 1))}}}", groups + 1),
                                  ("granular", "{strategy: granular}", 2 ** groups),
                                  ("partitioned (2)", "{strategy: partitioned, sections: 2}", trials)):
        # top_k has groups + 1 distinct choices: more trials would repeat (compile refuses it, QAS403)
        found = run(work / model / strategy.split()[0], model, search, min(trials, cap))
        rows.append(summary(model, strategy, found))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | strategy | groups | trials | to_tol | float nodes (share) | within | value | wall_s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['strategy']} | {r['groups']} | {r['trials']} | {r['to_tolerance'] or '-'} "
                     f"| {r['float_nodes']} ({r['float_share']:.0%}) | {'yes' if r['within'] else 'no'} "
                     f"| {r['value']:.4g} | {r['wall_s']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet_bn,detector")
    parser.add_argument("--trials", type=int, default=30, help="n_trials of the sampled strategies")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qas-bench-strategies-") as work:
        rows = [row for model in args.models.split(",") for row in bench_model(model, args.trials, Path(work))]
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
