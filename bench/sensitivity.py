"""Sensitivity-guided mixed precision against the same budget without it: a folder in; the two searches run with the
real amd-quark, and their values, the groups kept in float and the analysis's cost against one trial printed (JSON too).

The model is an MLP whose fc2 holds one outlier weight (500 among weights of about 0.3) on an input that is always 0:
harmless in float, but XINT8's per-tensor power-of-two weights of fc2 round to 0. Both searches sample the same space
(calibration method and CLE) for the same number of trials; one also searches keep_float top_k.

  .venv/bin/python bench/sensitivity.py /tmp/bench-sens [--trials 6]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SPEC = """\
qas: 1
name: {name}
model: ../models/outlier.onnx
calibration: {{folder: ../data/calib}}
evaluation: {{metric: L2, data: {{folder: ../data/eval}}}}
search:
  space:
    activation: [XInt8Spec]
    activation_params: {{symmetric: [true], calibration_method: [MinMax, Percentile, MinMSE], only_if: activation}}
    weight: [XInt8Spec]
    weight_params: {{symmetric: [true], quant_granularity: [Tensor], only_if: weight}}
    cle_algo: [null, cle]
  two_stage: false
  n_trials: {trials}
{keep_float}device: cpu
"""
KEEP_FLOAT = "keep_float:\n  sensitivity: {method: L2, samples: 8}\n  search: {top_k: [0, 1, 2, 4]}\n"


def build(folder: Path, width: int = 32) -> None:
    """models/outlier.onnx, data/calib (16) and data/eval (16) .npy samples, seeded."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def gemm(name: str, x: str, w: np.ndarray, b: np.ndarray) -> str:
        inits.extend([numpy_helper.from_array(w.astype(np.float32), name + ".w"),
                      numpy_helper.from_array(b.astype(np.float32), name + ".b")])
        nodes.append(helper.make_node("Gemm", [x, name + ".w", name + ".b"], [name], name=name, transB=1))
        return name

    def relu(name: str, x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [name], name=name))
        return name

    w1, b1 = rng.normal(0, 0.2, (width, width)), rng.normal(0, 0.05, width)
    w1[0], b1[0] = 0.0, -1.0
    x = relu("relu1", gemm("fc1", "input", w1, b1))
    w2 = rng.normal(0, 0.2, (width, width))
    w2[:, 0] = 0.0
    w2[3, 0] = 500.0
    x = relu("relu2", gemm("fc2", x, w2, rng.normal(0, 0.05, width)))
    for i in (3, 4):
        x = relu(f"relu{i}", gemm(f"fc{i}", x, rng.normal(0, 0.2, (width, width)), rng.normal(0, 0.05, width)))
    x = gemm("head", x, rng.normal(0, 0.2, (10, width)), rng.normal(0, 0.05, 10))
    graph = helper.make_graph(nodes, "outlier", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for sub in ("models", "data/calib", "data/eval"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "models" / "outlier.onnx"))
    for kind in ("calib", "eval"):
        for i in range(16):
            np.save(folder / "data" / kind / f"{i:02d}.npy", rng.normal(0, 1, (1, width)).astype(np.float32))


def search(folder: Path, name: str, trials: int, keep_float: str) -> dict:
    """Compile and run one search; its best value, kept groups, wall time and per-trial times out."""
    spec_dir = folder / name
    spec_dir.mkdir(exist_ok=True)
    (spec_dir / "spec.yaml").write_text(SPEC.format(name=name, trials=trials, keep_float=keep_float))
    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec_dir / "spec.yaml")],
                              capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    out = spec_dir / "autosearch_output"
    started = time.monotonic()
    ran = subprocess.run([sys.executable, str(out / f"{name}_autosearch.py")], capture_output=True, text=True)
    wall = time.monotonic() - started
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    best = json.loads((out / "best_config.json").read_text())
    import optuna

    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(out / f"{name}_study.journal")))
    study = next(s for s in optuna.get_all_study_summaries(storage) if not s.study_name.endswith("-grid"))
    trials_done = [t for t in optuna.load_study(study_name=study.study_name, storage=storage).get_trials()
                   if t.state.name == "COMPLETE" and "reused_from" not in t.user_attrs]
    per_trial = sorted((t.datetime_complete - t.datetime_start).total_seconds() for t in trials_done)
    result = {"value": best["value"], "config": best["config"], "keep_float": best.get("keep_float"),
              "wall_s": round(wall, 1), "trial_s_median": round(per_trial[len(per_trial) // 2], 3),
              "trials_quantized": len(trials_done)}
    sens = out / "sensitivity.json"
    if sens.is_file():
        data = json.loads(sens.read_text())
        result["analysis"] = {"cost": data["cost"],
                              "top": [(g["name"], round(g["score"], 5)) for g in data["groups"][:4]],
                              "baseline_error": data["baseline_error"]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--trials", type=int, default=6)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    build(args.folder)
    plain = search(args.folder, "plain", args.trials, "")
    guided = search(args.folder, "guided", args.trials, KEEP_FLOAT)
    cost = guided["analysis"]["cost"]
    analysis_s = cost["quantize_s"] + cost["infer_s"]
    print(json.dumps({"plain": plain, "guided": guided}, indent=2, default=str))
    print(f"\nsame budget ({args.trials} trials, L2 at the output, lower is better):")
    print(f"  without keep_float.search: best {plain['value']:.6g}")
    print(f"  with keep_float.search:    best {guided['value']:.6g}, keeps {guided['keep_float']['groups']} float "
          f"({guided['keep_float']['choice']})")
    print(f"  analysis: 1 quantization ({cost['quantize_s']:g} s) + {cost['inferences']} inferences "
          f"({cost['candidates']} candidates, {cost['infer_s']:g} s) = {analysis_s:.2f} s; one trial (median) "
          f"{guided['trial_s_median']:g} s")


if __name__ == "__main__":
    main()
