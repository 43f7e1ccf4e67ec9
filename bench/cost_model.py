"""Measure the rough time estimate against real runs: flags in; measured figures, fitted constants and
estimate/actual ratios out (a table, or JSON with --json).

Four models of clearly different size and shape: the example's tinycnn (22 KB, 7 nodes, 3 fine-tuned layers), and
three generated here by bench/make_models.py (never committed): resnetish (6.3 MB, 50 nodes, 22 fine-tuned layers),
detector (2 MB, 31 nodes, 14 Conv at a 160x160 input: much compute per MB) and widemlp (34 MB, 7 nodes, 4 Gemm
layers: many bytes, few nodes).
Per model, in a temp workspace:
  1. a real run, first (this process has not loaded Quark yet): the spec compiled with `python -m
     compiler compile` and `<out>/<name>_autosearch.py` run as a subprocess (engine qas, XINT8_SEARCH,
     a 3-config grid stage then AdaRound/AdaQuant trials at the two iteration counts): start-up =
     process start to the first trial's start, plus the first trial's excess over the other plain
     trials (first-call costs), plus the tail = last trial's end to process exit; each trial's time
     from the study (Optuna's datetime_start/complete).
  2. components, in this process with Quark's ModelQuantizer (XINT8: MinMSE, power-of-two scales):
     one float forward pass (onnxruntime, median), plain quantization at two calibration sample counts
     (the slope is calibration's cost per sample), AdaRound and AdaQuant at two iteration counts (the
     slope is the cost per iteration, the rest the per-layer data collection), and the warm-up of the
     first fine-tuning in a process (first model only).
  3. `<script> --sensitivity` (the ranking a keep_float.search runs first): its quantization and inference time;
     and the mean size of the quantized models the real run wrote (the disk estimate's size per model).
Then the constants are fitted from all models (least squares of the relative error, see fit()) and the
estimate (compiler/back/cost.py) of each part of each real run is set against what it took: the ratio
estimate/actual, target within 2x.
The ratios are printed twice: with the constants in cost_model.json, and with this run's fit.
The machine is shared and noisy: the load average is recorded beside the figures, and each in-process
quantization is timed --repeat times, the least kept. --write puts the fitted constants and this run's
figures (measured.fit: when, where, versions, per model) into cost_model.json; run again with
--record-check to check them on a fresh run (measured.check). Takes 15-30 minutes on 2 idle CPU cores, an hour
or more on a loaded machine: --keep DIR saves each model's measurements there, --resume reuses them, so models can
be measured by separate runs (--only) and fitted together by a last `--keep DIR --resume --write`.

  .venv/bin/python bench/cost_model.py [--json] [--only NAME ...] [--no-run | --no-fit] [--repeat 2]
                                       [--keep DIR [--resume]] [--write | --record-check]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]
EXAMPLE = REPO / "specs" / "example"
COST_MODEL = REPO / "compiler" / "data" / "cost_model.json"

import make_models  # noqa: E402 - bench/ is on the path only now

# name -> (calibration samples, evaluation samples, fine-tuning iterations low/high, sampler trials of the real run)
MODELS = {"tinycnn": (8, 4, (10, 210), 6), "resnetish": (16, 8, (5, 45), 4), "detector": (16, 8, (5, 30), 4),
          "widemlp": (16, 8, (10, 60), 4)}
CALIBRATION_COUNTS = (4, 32)  # plain quantization at these sample counts (the samples are cycled)
BATCH = {"adaround": 1, "adaquant": 2}  # as XINT8_SEARCH draws them (AdaRound: Quark's default)
SPEC = """qas: 1
name: {name}
model: models/{name}.onnx
calibration:
  folder: data/calib
evaluation:
  metric: L2
  data:
    folder: data/eval
search:
  preset: XINT8_SEARCH
  override:
    adaround_params:
      num_iterations: [{low}, {high}]
    adaquant_params:
      num_iterations: [{low}, {high}]
      early_stop: [false]
      batch_size: [{adaquant_batch}]
  sampler: Random
  seed: 0
  n_trials: {trials}
device: cpu
output:
  dir: out
"""


def workspace(root: Path, name: str) -> Path:
    """The model, its samples and the bench spec in a folder of their own; the spec's path out."""
    calib, evaluation, (low, high), trials = MODELS[name]
    folder = root / name
    if name == "tinycnn":
        shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("autosearch_output", "spec.yaml"),
                        dirs_exist_ok=True)
    else:
        make_models.make(name, folder, calib, evaluation)
    spec = folder / "spec.yaml"
    spec.write_text(SPEC.format(name=name, low=low, high=high, trials=trials, adaquant_batch=BATCH["adaquant"]))
    return spec


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("amd-quark", "torch", "onnxruntime", "optuna")}


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


class Reader:
    """The calibration samples, cycled up to `count` (Quark's reader protocol)."""

    def __init__(self, folder: Path, name: str, count: int):
        files = sorted(folder.glob("*.npy"))
        self.samples = [{name: np.load(files[i % len(files)])} for i in range(count)]
        self.index = 0

    def get_next(self) -> dict[str, Any] | None:
        if self.index >= len(self.samples):
            return None
        self.index += 1
        return self.samples[self.index - 1]

    def rewind(self) -> None:
        self.index = 0


def quantize(model: Path, samples: int, algorithm: str | None = None, iterations: int = 0,
             output: Path | None = None) -> float:
    """Seconds for one ModelQuantizer.quantize_model call (XINT8, optional AdaRound/AdaQuant on CPU)."""
    from quark.onnx import AdaQuantConfig, AdaRoundConfig, ModelQuantizer, QConfig, QLayerConfig, XInt8Spec

    algos = []
    if algorithm == "adaround":
        algos = [AdaRoundConfig(num_iterations=iterations, batch_size=BATCH[algorithm], optim_device="cpu",
                                infer_device="cpu")]
    elif algorithm == "adaquant":
        algos = [AdaQuantConfig(num_iterations=iterations, batch_size=BATCH[algorithm], optim_device="cpu",
                                infer_device="cpu")]
    config = QConfig(QLayerConfig(activation=XInt8Spec(), weight=XInt8Spec()), algo_config=algos)
    reader = Reader(model.parent.parent / "data" / "calib", "input", samples)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        ModelQuantizer(config).quantize_model(str(model), str(output or Path(tmp) / "q.onnx"), reader)
        return time.perf_counter() - start


def forward(model: Path, folder: Path, rounds: int = 5) -> float:
    """Median seconds of one forward pass of one sample (onnxruntime, CPU, Quark's custom ops registered)."""
    import onnxruntime
    from quark.onnx.operators.custom_ops import get_library_path

    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(get_library_path("CPU"))
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    samples = [np.load(p) for p in sorted(folder.glob("*.npy"))]
    session.run(None, {name: samples[0]})
    times = []
    for _ in range(rounds):
        for sample in samples:
            start = time.perf_counter()
            session.run(None, {name: sample})
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def components(spec: Path, first: bool, repeat: int) -> dict[str, Any]:
    """Step 1 for one model: forward passes, calibration slope, fine-tuning slopes and the rest.

    Each quantization is timed `repeat` times and the least kept: on a shared machine a run is only
    ever slowed down by the others (torch's two intra-op threads most of all), never sped up.
    """
    name = spec.parent.name
    calib, _, (low, high), _ = MODELS[name]
    model = spec.parent / "models" / f"{name}.onnx"
    quantized = spec.parent / "quantized.onnx"

    def least(samples: int, algorithm: str | None = None, iterations: int = 0) -> float:
        return min(quantize(model, samples, algorithm, iterations) for _ in range(repeat))

    quantize(model, 2, output=quantized)  # imports, the custom-op check, first-call costs
    few, many = CALIBRATION_COUNTS
    plain = {n: least(n) for n in (few, many)}
    found: dict[str, Any] = {"forward_float_s": forward(model, spec.parent / "data" / "eval"),
                             "forward_quantized_s": forward(quantized, spec.parent / "data" / "eval"),
                             "plain_s": {str(n): s for n, s in plain.items()},
                             "calibration_s_per_sample": (plain[many] - plain[few]) / (many - few)}
    at_calib = least(calib)
    found["plain_at_calibration_s"] = at_calib
    for algorithm in ("adaround", "adaquant"):
        once = quantize(model, calib, algorithm, 1)  # the first fine-tuning in this process: torch's first calls
        t_one = least(calib, algorithm, 1)
        if first and algorithm == "adaround":
            found["finetune_warmup_s"] = once - t_one
        t_low, t_high = least(calib, algorithm, low), least(calib, algorithm, high)
        slope = (t_high - t_low) / (high - low)
        found[algorithm] = {"s": {"1": t_one, str(low): t_low, str(high): t_high}, "s_per_iteration": slope,
                            "collect_s": t_one - slope - at_calib}
    return found


def run_script(spec: Path) -> dict[str, Any]:
    """Step 2 for one model: compile, run the script, and time its parts from the study."""
    import optuna
    from ruamel.yaml import YAML

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    shutil.rmtree(spec.parent / "out", ignore_errors=True)  # a fresh study, never a resumed one
    subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], cwd=REPO, env=env, check=True,
                   capture_output=True)
    out = spec.parent / "out"
    manifest = YAML(typ="safe").load(out / "run_manifest.yaml")
    load_before = load_average()
    start = time.time()
    done = subprocess.run([sys.executable, str(out / manifest["outputs"]["script"])], capture_output=True, text=True,
                          check=False)
    end = time.time()
    if done.returncode != 0:
        raise SystemExit(f"{spec.parent.name}: the script exited {done.returncode}:\n{done.stderr[-2000:]}")
    db = out / manifest["outputs"]["study"]["db"]
    if db.suffix == ".journal":  # engine qas's default storage
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        storage: Any = JournalStorage(JournalFileBackend(str(db)))
    else:
        storage = f"sqlite:///{db}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = []
    for summary in optuna.get_all_study_summaries(storage):
        for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials:
            config = t.user_attrs.get("config", {})
            algorithm = config.get("algorithms")
            params = config.get(f"{algorithm}_params", {}) if algorithm else {}
            trials.append({"start": t.datetime_start.timestamp(), "end": t.datetime_complete.timestamp(),
                           "s": (t.datetime_complete - t.datetime_start).total_seconds(), "state": t.state.name,
                           "algorithm": algorithm, "iterations": params.get("num_iterations"),
                           "reused": "reused_from" in t.user_attrs})
    trials.sort(key=lambda t: t["start"])
    plain = [t["s"] for t in trials if t["algorithm"] is None]
    models = [p.stat().st_size for p in out.rglob("*.onnx") if p.name != "best_model.onnx"]
    return {"wall_s": end - start, "quantized_bytes": statistics.fmean(models) if models else None,
            "quantized_models": len(models), "startup_s": trials[0]["start"] - start, "tail_s": end - trials[-1]["end"],
            "first_trial_excess_s": max(plain[0] - statistics.median(plain[1:]), 0.0),
            "trials": trials, "load": [load_before, load_average()]}


def rank(spec: Path) -> dict[str, Any]:
    """`<script> --sensitivity` on the compiled spec (what keep_float.search runs before its trials): its recorded
    cost."""
    from ruamel.yaml import YAML

    out = spec.parent / "out"
    manifest = YAML(typ="safe").load(out / "run_manifest.yaml")
    (out / "sensitivity.json").unlink(missing_ok=True)
    done = subprocess.run([sys.executable, str(out / manifest["outputs"]["script"]), "--sensitivity"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{spec.parent.name}: --sensitivity exited {done.returncode}:\n{done.stderr[-2000:]}")
    data = json.loads((out / "sensitivity.json").read_text(encoding="utf-8"))
    return {**data["cost"], "samples": data["samples"]}


def solve(rows: list[list[float]], targets: list[float]) -> list[float]:
    """Least squares of relative error (each row scaled by its target), terms below zero dropped and refitted."""
    keep = list(range(len(rows[0])))
    while True:
        a = np.array([[row[i] / y for i in keep] for row, y in zip(rows, targets, strict=True)])
        x = np.linalg.lstsq(a, np.ones(len(targets)), rcond=None)[0]
        if (x >= 0).all() or len(keep) == 1:
            full = [0.0] * len(rows[0])
            for i, v in zip(keep, x, strict=True):
                full[i] = max(float(v), 0.0)
            return full
        keep.pop(int(np.argmin(x)))


def fit(measured: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Constants for compiler/data/cost_model.json from every model's components (and real run, when there is one)."""
    from compiler.back.cost import constants, workload
    from compiler.back.cost import per_sample as sample_s

    ws = {name: workload(m["facts"]) for name, m in measured.items()}
    comp = {name: m["components"] for name, m in measured.items()}

    def per_sample(targets: dict[str, float]) -> dict[str, float]:
        per_node, per_mb, per_mb_melem = solve([[ws[n].nodes, ws[n].model_mb, ws[n].model_mb * ws[n].input_melems]
                                                for n in targets], list(targets.values()))
        return {"per_node": per_node, "per_mb": per_mb, "per_mb_melem": per_mb_melem}

    out: dict[str, Any] = {
        "calibration_s_per_sample": per_sample({n: comp[n]["calibration_s_per_sample"] for n in ws}),
        "evaluation_s_per_sample": per_sample({n: comp[n]["forward_quantized_s"] for n in ws})}
    forward = {n: sample_s(out["evaluation_s_per_sample"], ws[n]) for n in ws}
    evaluation = {n: ws[n].evaluation * forward[n] for n in ws}
    runs = {n: m["run"] for n, m in measured.items() if "run" in m}
    if runs:
        calibration = {n: ws[n].calibration * comp[n]["calibration_s_per_sample"] for n in runs}
        fixed = {n: statistics.median([t["s"] for t in r["trials"] if t["algorithm"] is None][1:])
                 - calibration[n] - evaluation[n] for n, r in runs.items()}
        out["trial_s"], out["trial_s_per_node"], out["trial_s_per_mb"] = solve(
            [[1.0, ws[n].nodes, ws[n].model_mb] for n in runs], list(fixed.values()))
        out["startup_s"] = statistics.fmean(r["startup_s"] + r["tail_s"] + r["first_trial_excess_s"] - evaluation[n]
                                            for n, r in runs.items())
        sizes = [(r["quantized_bytes"] - ws[n].model_mb * 1e6 * 8 / 32) / max(ws[n].quantized_nodes, 1)
                 for n, r in runs.items() if r.get("quantized_bytes")]
        if sizes:
            out["quantized_size"] = {"qdq_bytes_per_node": max(statistics.median(sizes), 0.0)}
    rows, targets = [], []
    for algorithm in ("adaround", "adaquant"):
        b = BATCH[algorithm]
        a, per_mb, per_mb_melem = solve([[ws[n].layers, b * ws[n].model_mb, b * ws[n].model_mb * ws[n].input_melems]
                                         for n in ws], [comp[n][algorithm]["s_per_iteration"] for n in ws])
        out[algorithm] = {"s_per_layer_iteration": a, "s_per_mb_sample_iteration": per_mb,
                          "s_per_mb_melem_sample_iteration": per_mb_melem}
        for n in ws:
            rows.append([1.0, ws[n].calibration * forward[n]])
            targets.append(max(comp[n][algorithm]["collect_s"], 1e-3) / ws[n].layers)
    fixed_layer, per_forward = solve(rows, targets)
    out["finetune_layer_s"] = {"fixed": fixed_layer, "per_forward": per_forward}
    warm = [c["finetune_warmup_s"] for c in comp.values() if "finetune_warmup_s" in c]
    if warm:
        out["finetune_warmup_s"] = warm[0]
    if runs:  # the level from the real runs: each factor so that the worst ratios above and below 1 are equal
        out["run_factor"] = {"plain": 1.0, "finetune": 1.0}
        for _ in range(4):
            c = {**constants(), **out}
            checked = [check(measured[n]["facts"], r, c)["parts"] for n, r in runs.items()]
            for factor, part in (("plain", "plain trials"), ("finetune", "fine-tuned trials")):
                ratios = [p[part]["ratio"] for p in checked if part in p]
                out["run_factor"][factor] /= math.sqrt(min(ratios) * max(ratios))
            ratios = [p["startup+tail"]["ratio"] for p in checked]
            out["startup_s"] /= math.sqrt(min(ratios) * max(ratios))
    ranked = {n: m["sensitivity"] for n, m in measured.items() if "sensitivity" in m}
    if ranked and runs:  # per candidate: what is left of the stage once its quantization (a plain trial's estimate)
        # and the forward passes are counted (the stage's fresh process pays first-call costs a trial does not)
        from compiler.back.cost import plain_s

        c = {**constants(), **out}
        per = {n: max((r["quantize_s"] + r["infer_s"] - plain_s(ws[n], c)) / (r["candidates"] + 2)
                      - r["samples"] * forward[n], 1e-4) for n, r in ranked.items()}
        fixed_c, per_node = solve([[1.0, ws[n].nodes] for n in per], list(per.values()))
        out["sensitivity_candidate_s"] = {"fixed": fixed_c, "per_node": per_node}
    return out


def check(facts: Any, run: dict[str, Any], c: dict[str, Any], ranked: dict[str, Any] | None = None) -> dict[str, Any]:
    """Estimate against actual for the parts of one real run (and the sensitivity ranking), with the constants `c`."""
    from compiler.back import cost

    w = cost.workload(facts)
    classes = cost.finetune_classes(facts.space)
    ran = [t for t in run["trials"] if t["state"] == "COMPLETE" and not t["reused"]]
    plain = [t for t in ran if t["algorithm"] is None]
    tuned = [t for t in ran if t["algorithm"] is not None]
    est_plain = cost.plain_s(w, c) * len(plain)
    est_tuned = sum(cost.plain_s(w, c) + cost.finetune_s(w, t["algorithm"], t["iterations"],
                                                         classes[t["algorithm"]].data_size, c,
                                                         classes[t["algorithm"]].batch) for t in tuned)
    est_start = cost.startup_s(w, False, c)  # the fine-tuning warm-up is counted with the fine-tuned trials
    est_tuned += c["finetune_warmup_s"] if tuned else 0.0
    excess = run["first_trial_excess_s"]  # the first trial's first-call costs: counted as start-up
    actual = {"startup+tail": run["startup_s"] + run["tail_s"] + excess,
              "plain trials": sum(t["s"] for t in plain) - excess,
              "fine-tuned trials": sum(t["s"] for t in tuned), "total": run["wall_s"]}
    est = {"startup+tail": est_start, "plain trials": est_plain, "fine-tuned trials": est_tuned,
           "total": est_start + est_plain + est_tuned}
    if ranked is not None:  # `qas sensitivity` on the same spec: the stage a keep_float.search runs first
        actual["sensitivity"] = ranked["quantize_s"] + ranked["infer_s"]
        est["sensitivity"] = cost.sensitivity_s(w, ranked["samples"], c)
    if run.get("quantized_bytes"):  # one quantized model on disk, as the budget counts it
        from compiler.check.budget_facts import quantized_model_bytes

        actual["model bytes"] = run["quantized_bytes"]
        est["model bytes"] = quantized_model_bytes(int(w.model_mb * 1e6), 8, w.quantized_nodes, c["quantized_size"])
    low, high = cost.estimate(facts, c).total_s
    return {"parts": {k: {"estimate_s": est[k], "actual_s": actual[k], "ratio": est[k] / actual[k]}
                      for k in actual if actual[k] > 0},
            "plan_range_s": [low, high], "actual_in_range": low <= run["wall_s"] <= high,
            "trials": {"plain": len(plain), "fine-tuned": [(t["algorithm"], t["iterations"]) for t in tuned]}}


def analyze(spec: Path) -> Any:
    from compiler.commands.pipeline import analyze as run_passes

    result, _, _ = run_passes(spec)
    if result.facts is None:
        raise SystemExit(f"{spec}: {[d.message for d in result.diagnostics]}")
    return result.facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--write", action="store_true",
                        help="write the fitted constants and this run's figures into compiler/data/cost_model.json")
    parser.add_argument("--record-check", action="store_true",
                        help="write only this run's estimate/actual ratios (constants unchanged) into cost_model.json")
    parser.add_argument("--only", choices=sorted(MODELS), action="append", help="measure only this model")
    parser.add_argument("--no-run", action="store_true", help="components only: no compiled script is run")
    parser.add_argument("--no-fit", action="store_true", help="real runs only: no components, no fit")
    parser.add_argument("--repeat", type=int, default=2, help="time each quantization this often, keep the least")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp dir); each model's "
                                                  "measurements are saved there as <name>.measured.json")
    parser.add_argument("--resume", action="store_true",
                        help="with --keep: reuse the measurements a previous (interrupted) run saved there")
    args = parser.parse_args()
    if args.write and (args.no_fit or args.no_run):
        parser.error("--write needs the components and the real runs")
    if args.resume and args.keep is None:
        parser.error("--resume needs --keep")
    # Quark prints tables on stdout: keep stdout for the result only.
    result_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    root = (args.keep or Path(tempfile.mkdtemp(prefix="qas-cost-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.chdir(root)  # Quark appends quantized_info.csv to the working directory
    measured: dict[str, dict[str, Any]] = {}
    try:
        for i, name in enumerate(args.only or MODELS):
            spec = workspace(root, name)
            facts = analyze(spec)
            saved = root / f"{name}.measured.json"
            if args.resume and saved.is_file():
                measured[name] = {**json.loads(saved.read_text(encoding="utf-8")), "facts": facts}
                continue
            measured[name] = {"facts": facts}
            if not args.no_run:  # first, while no Quark import of this process competes with it
                measured[name]["run"] = run_script(spec)
                measured[name]["sensitivity"] = rank(spec)
            if not args.no_fit:
                measured[name]["components"] = components(spec, first=i == 0, repeat=args.repeat)
            measured[name]["load_after"] = load_average()
            saved.write_text(json.dumps({k: v for k, v in measured[name].items() if k != "facts"}), encoding="utf-8")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    from compiler.back.cost import constants, workload

    fitted = {} if args.no_fit else fit(measured)
    committed = constants()
    report = {"when": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
              "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}",
              "versions": versions(), "models": {}, "fitted": fitted}
    for name, m in measured.items():
        w = workload(m["facts"])
        entry = {"model_mb": w.model_mb, "nodes": w.nodes, "finetuned_layers": w.layers,
                 "calibration_samples": w.calibration, "evaluation_samples": w.evaluation,
                 "components": m.get("components"), "load_after": m["load_after"]}
        if "run" in m:
            entry["run"] = m["run"]
            ranked = m.get("sensitivity")
            entry["sensitivity"] = ranked
            entry["check"] = check(m["facts"], m["run"], committed, ranked)  # the constants in cost_model.json
            if {"startup_s", "trial_s"} <= set(fitted):
                entry["check_fitted"] = check(m["facts"], m["run"], {**committed, **fitted}, ranked)  # this run's fit
        report["models"][name] = entry
    if args.write or args.record_check:
        record(report, fitted=args.write)
    if args.json:
        json.dump(report, result_out, indent=2)
        result_out.write("\n")
    else:
        result_out.write(table(report))
    result_out.flush()
    return 0


def rounded(value: Any) -> Any:
    """Three significant digits, through dicts and lists: what cost_model.json keeps."""
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return float(f"{value:.3g}") if isinstance(value, float) else value


def record(report: dict[str, Any], fitted: bool) -> None:
    """This run into compiler/data/cost_model.json: with `fitted`, the fitted constants and, under measured.fit,
    each model's figures and the ratios with them; else, under measured.check, the ratios with the constants there."""
    data = json.loads(COST_MODEL.read_text(encoding="utf-8"))
    if fitted:
        for name, value in report["fitted"].items():
            basis = data.get(name, {}).get("basis", "fitted: bench/cost_model.py")
            data[name] = {**(rounded(value) if isinstance(value, dict) else {"value": rounded(value)}), "basis": basis}
    models = {}
    for name, m in report["models"].items():
        checked = m.get("check_fitted" if fitted else "check")
        if checked is None:
            continue
        models[name] = {"model_mb": m["model_mb"], "nodes": m["nodes"], "finetuned_layers": m["finetuned_layers"],
                        "samples": {"calibration": m["calibration_samples"], "evaluation": m["evaluation_samples"]},
                        "trials": {"plain": checked["trials"]["plain"],
                                   "fine-tuned": [f"{a} {i}" for a, i in checked["trials"]["fine-tuned"]]},
                        "load": m["run"]["load"],
                        "actual_s": {k: v["actual_s"] for k, v in checked["parts"].items()},
                        "estimate_s": {k: v["estimate_s"] for k, v in checked["parts"].items()},
                        "ratio": {k: v["ratio"] for k, v in checked["parts"].items()}}
        if fitted:
            models[name]["components"] = m["components"]
    data.setdefault("measured", {})["fit" if fitted else "check"] = rounded(
        {"when": report["when"], "where": report["machine"], "versions": report["versions"], "models": models})
    COST_MODEL.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def table(report: dict[str, Any]) -> str:
    lines = [f"{report['when']} on {report['machine']}"]
    for name, m in report["models"].items():
        lines.append(f"\n{name}: {m['model_mb']:.3f} MB, {m['nodes']} nodes, {m['finetuned_layers']} fine-tuned "
                     f"layers, {m['calibration_samples']} calibration / {m['evaluation_samples']} evaluation samples")
        if "check" not in m:
            continue
        run = m["run"]
        lines.append(f"  real run: {run['wall_s']:.1f} s, load {run['load'][0]} -> {run['load'][1]}; "
                     f"trials {m['check']['trials']}")
        for label, key in (("cost_model.json", "check"), ("this run's fit", "check_fitted")):
            if key not in m:
                continue
            lines.append(f"  estimate with {label}:")
            for part, v in m[key]["parts"].items():
                lines.append(f"    {part:<18} estimate {v['estimate_s']:8.1f} s  actual {v['actual_s']:8.1f} s  "
                             f"ratio {v['ratio']:.2f}")
            low, high = m[key]["plan_range_s"]
            lines.append(f"    plan's range {low:.0f}-{high:.0f} s; actual inside: {m[key]['actual_in_range']}")
    lines.append("\nfitted constants (copy into compiler/data/cost_model.json):")
    lines.append(json.dumps(report["fitted"], indent=2))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
