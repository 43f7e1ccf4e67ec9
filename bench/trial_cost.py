"""Benchmark: what a trial costs against its floor, with the calibration cache on and off, beside engine autosearchpro,
and what search.prune saves: flags in, tables (or JSON) out.

Three parts, each run as a user would (`python -m compiler compile`, the compiled script as a subprocess, then
`qas report --format json` for the recorded steps and cost section):

  1. cost     per model (bench/make_models.py's detector, 0.5 M weights, and resnetwide, 4.4 M) and calibration
              method (and Percentile with four values searched), a calibration-only space (the weights' symmetry
              and per-channel choice searched, Random sampler, --cost-trials trials): the median trial over the
              floor F (a float pass over the calibration samples + the median quantized pass over the evaluation
              samples) and the calibrations run (and derived from a kept histogram collection), cache on vs off.
  2. engines  a --engine-trials trial A8W8 calibration search (activation symmetry and method, weight symmetry and
              granularity; TPE, seed 0) on the detector: wall time of engine qas (cache on) over engine autosearchpro
              on the same spec and seed, and both best values.
  3. prune    a --prune-trials trial search on the zoo's resnet_bn (tests/zoo.py) with --prune-eval evaluation
              samples and short fine-tuning, prune on vs off: evaluation inferences, pruned trials, the best value
              and configuration of each.

Wall times are measured side by side in one run on a shared machine: read the ratios. About 30 minutes on 2 cores
with the defaults.

  .venv/bin/python bench/trial_cost.py [--parts cost,engines,prune] [--cost-trials 4] [--cost-models detector,...]
                                       [--cost-samples 16,8] [--engine-samples 16,8]
                                       [--engine-trials 20]
                                       [--prune-trials 50] [--prune-eval 32] [--prune-sampler TPE|Random] [--json]
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

from bench.make_models import make  # noqa: E402 - the repo's own bench models, importable once REPO is on the path
from tests.zoo import build  # noqa: E402

METHODS = ("MinMax", "Percentile", "LayerwisePercentile")
# the cost part's rows: a calibration method, or Percentile with its value searched too (one histogram collection
# serves every value: runtime/histogram_cache.py)
PERCENTILE_VALUES = "Percentile values"
COST_ROWS = {**{m: (m, None) for m in METHODS}, PERCENTILE_VALUES: ("Percentile", [99.9, 99.99, 99.999, 99.9999])}
CALIBRATION_SPACE = {  # Int8 activations and weights, no fine-tuning: every trial is a calibration plus a quantization
    "activation": ["Int8Spec"],
    "activation_params": {"symmetric": [True], "calibration_method": ["MinMax"], "only_if": "activation"},
    "weight": ["Int8Spec"],
    "weight_params": {"symmetric": [True, False], "quant_granularity": ["Tensor", "Channel"], "only_if": "weight"},
}


def write_spec(folder: Path, name: str, model: str, space: dict[str, Any] | None, extra: dict[str, Any]) -> Path:
    """A spec for a bench model under folder (data/calib, data/eval); extra deep-merged into `search`."""
    from ruamel.yaml import YAML

    search: dict[str, Any] = {"space": space, "sampler": "TPE", "seed": 0, "n_trials": 6} | extra
    spec = {"qas": 1, "name": name, "model": model, "calibration": {"folder": "data/calib"},
            "evaluation": {"metric": "L2", "data": {"folder": "data/eval"}}, "search": search, "device": "cpu"}
    path = folder / "spec.yaml"
    YAML().dump(spec, path)
    return path


def run_search(spec: Path) -> tuple[float, dict[str, Any]]:
    """Compile and run a spec; the script's wall time and `qas report --format json` out."""
    from ruamel.yaml import YAML

    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True, text=True,
                              cwd=REPO)
    if compiled.returncode != 0:
        raise SystemExit(f"{spec}: compile failed:\n{compiled.stdout[-2000:]}{compiled.stderr[-2000:]}")
    out = spec.parent / "autosearch_output"
    script = out / YAML(typ="safe").load(out / "run_manifest.yaml")["outputs"]["script"]
    started = time.perf_counter()
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=spec.parent)
    wall = time.perf_counter() - started
    if ran.returncode != 0:
        raise SystemExit(f"{spec}: the search failed:\n{ran.stderr[-3000:]}")
    report = subprocess.run([sys.executable, "-m", "compiler", "report", str(out), "--format", "json"],
                            capture_output=True, text=True, cwd=REPO)
    return wall, json.loads(report.stdout)


def cost_part(work: Path, trials: int, models: tuple[str, ...] = ("detector", "resnetwide"),
              samples: tuple[int, int] = (16, 8)) -> list[dict[str, Any]]:
    """samples: (calibration, evaluation) samples written per model. Quark's quantize step costs about the same
    whatever their number, the floor grows with it: the ratio depends on it, so the table says which was used."""
    rows = []
    for model in models:
        for name, (method, percentiles) in COST_ROWS.items():
            row: dict[str, Any] = {"model": model, "method": name, "samples": list(samples)}
            for cache in (False, True):  # off first: the cache cannot help the run after it
                folder = work / "cost" / f"{model}-{name.replace(' ', '-')}-{'on' if cache else 'off'}"
                make(model, folder, calib=samples[0], evaluation=samples[1])
                space = json.loads(json.dumps(CALIBRATION_SPACE))
                space["activation_params"]["calibration_method"] = [method]
                if percentiles is not None:
                    space["Percentile"] = percentiles
                spec = write_spec(folder, model, f"models/{model}.onnx", space,
                                  {"sampler": "Random", "n_trials": trials, "calibration_cache": cache})
                wall, report = run_search(spec)
                cost = report["cost"]
                side = "on" if cache else "off"
                row[f"trial_over_floor_{side}"] = round(cost["trial_median_s"] / cost["floor_s"], 2)
                row[f"calibrations_{side}"] = cost["calibrations"]
                row[f"calibrations_derived_{side}"] = cost.get("calibrations_derived", 0)
                row[f"quantizations_{side}"] = cost["quantizations"]
                for step in ("calibrate_s", "quantize_s", "evaluate_s"):
                    row[f"{step}_{side}"] = cost["steps"][step]
                row[f"wall_s_{side}"] = round(wall, 1)
                row["floor_s"] = cost["floor_s"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def engines_part(work: Path, trials: int, samples: tuple[int, int] = (16, 8)) -> dict[str, Any]:
    space = json.loads(json.dumps(CALIBRATION_SPACE))
    space["activation_params"]["symmetric"] = [True, False]
    space["activation_params"]["calibration_method"] = list(METHODS)
    result: dict[str, Any] = {"trials": trials, "samples": list(samples)}
    for engine in ("autosearchpro", "qas"):
        folder = work / "engines" / engine
        make("detector", folder, calib=samples[0], evaluation=samples[1])
        spec = write_spec(folder, "detector", "models/detector.onnx", space,
                          {"engine": engine, "n_trials": trials, "two_stage": False})
        wall, report = run_search(spec)
        result[engine] = {"wall_s": round(wall, 1), "best_value": report["best"]["value"],
                          "best_config": report["best"]["config"], "cost": report.get("cost")}
        print(json.dumps({engine: result[engine]}), flush=True)
    result["wall_ratio_qas_over_autosearchpro"] = round(result["qas"]["wall_s"] / result["autosearchpro"]["wall_s"], 2)
    result["same_best_value"] = result["qas"]["best_value"] == result["autosearchpro"]["best_value"]
    return result


def prune_part(work: Path, trials: int, eval_samples: int, sampler: str = "TPE") -> dict[str, Any]:
    """Prune off then on, same spec and seed. With TPE the draws follow the scores (pruned trials steer it); with
    Random they do not, so both runs draw the same configurations and differ only in what pruning stopped."""
    result: dict[str, Any] = {"trials": trials, "evaluation_samples": eval_samples, "sampler": sampler}
    for prune in (False, True):
        folder = work / "prune" / ("on" if prune else "off")
        zm = build("resnet_bn", folder, eval_samples=eval_samples)
        extra = f"search: {{sampler: {sampler}{', prune: wilcoxon' if prune else ''}}}\n"
        spec = zm.write_spec(folder, preset="A8W8_SEARCH", n_trials=trials, extra_yaml=extra)
        wall, report = run_search(spec)
        cost = report["cost"]
        result["on" if prune else "off"] = {
            "wall_s": round(wall, 1), "inferences": cost["inferences"], "inferences_saved": cost["inferences_saved"],
            "pruned": cost["pruned"], "best_value": report["best"]["value"], "best_config": report["best"]["config"]}
        print(json.dumps({"prune": prune} | result["on" if prune else "off"]), flush=True)
    result["inferences_ratio_on_over_off"] = round(result["on"]["inferences"] / result["off"]["inferences"], 3)
    result["same_best_config"] = result["on"]["best_config"] == result["off"]["best_config"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="cost,engines,prune")
    parser.add_argument("--cost-trials", type=int, default=4)
    parser.add_argument("--cost-models", default="detector,resnetwide",
                        help="bench/make_models.py models: detector (0.5 M weights), resnetish (1.6 M), resnetwide "
                             "(4.4 M), "
                             "widemlp (8.4 M)")
    parser.add_argument("--cost-samples", default="16,8", help="calibration,evaluation samples of the cost part")
    parser.add_argument("--engine-samples", default="16,8", help="calibration,evaluation samples of the engines part")
    parser.add_argument("--engine-trials", type=int, default=20)
    parser.add_argument("--prune-trials", type=int, default=50)
    parser.add_argument("--prune-eval", type=int, default=32)
    parser.add_argument("--prune-sampler", default="TPE", help="TPE or Random (draws that do not follow the scores)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    parts = args.parts.split(",")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="qas-trial-cost-") as work:
        if "cost" in parts:
            calib, evaluation = (int(n) for n in args.cost_samples.split(","))
            results["cost"] = cost_part(Path(work), args.cost_trials, tuple(args.cost_models.split(",")),
                                        (calib, evaluation))
        if "engines" in parts:
            calib, evaluation = (int(n) for n in args.engine_samples.split(","))
            results["engines"] = engines_part(Path(work), args.engine_trials, (calib, evaluation))
        if "prune" in parts:
            results["prune"] = prune_part(Path(work), args.prune_trials, args.prune_eval, args.prune_sampler)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
