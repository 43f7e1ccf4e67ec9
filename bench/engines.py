"""Benchmark: the example under engine qas and engine autosearchpro, side by side: flags in, a table or JSON out.

Each engine gets its own copy of specs/example in a temp dir (same spec, seed and budget; only
`search.engine` differs), is compiled with `python -m compiler compile` and its script is run as a
subprocess, three rounds in a row:
  1. first run          n_trials (default 20: the example's 3-config grid stage + 20 TPE trials);
  2. re-run             the same script again, budget already reached (the resume case);
  3. extended (+N)      recompiled with n_trials + N, run again (--extend 0 skips it): a resume
                        with work left, where AutoSearchPro re-runs its whole grid stage (F11).
Per round and engine: wall time of the script, sampler trials, grid-stage runs, configurations
quantized, model files written, best value (best_config.json) and disk used by the output dir;
then ratios qas/autosearchpro and whether the best values agree. Wall time includes interpreter
start-up and the quark/torch imports on both sides; the engines alternate which goes first. The
machine is shared and noisy: read the ratios, not the absolute seconds. Takes about a minute
on 2 CPU cores. Exits 1 (with the stderr tail) when an engine fails to compile or run.

  .venv/bin/python bench/engines.py [--n-trials 20] [--extend 5] [--json] [--keep]
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "specs" / "example"
ENGINES = ("qas", "autosearchpro")
QUARK_LOG = "auto_search.log"
LOGGED_CONFIG = re.compile(r"^(?:Grid search params:|\[Trial \d+\] Params: )(\{.*\})$", re.M)
HOW_COUNTED = {
    "wall_s": "time.perf_counter() around the script's subprocess (compile not included)",
    "sampler_trials": "new trials (any state) in the Optuna study run_manifest.yaml outputs.study.name",
    "grid_runs": "qas: new trials in study <name>-grid; autosearchpro: 'Grid search params:' lines Quark "
                 "appended to auto_search.log (its grid stage runs outside the study)",
    "configs_quantized": "qas: distinct `config` user attrs of new trials without `reused_from`; autosearchpro: "
                         "distinct configs in the grid/trial lines Quark appended to auto_search.log",
    "models_written": "quantized_model*.onnx files in the output dir written during the round (mtime)",
    "best_value": "`value` in best_config.json",
    "disk_bytes": "sum of file sizes under the output dir after the round",
}


class EngineFailed(Exception):
    """An engine's compile or search exited non-zero: what ran, its exit code and the tail of its output."""


class Engine:
    """One engine's copy of the example: its spec, output dir and study, and the counts seen so far."""

    def __init__(self, root: Path, engine: str) -> None:
        self.engine = engine
        self.spec = root / engine / "spec.yaml"
        shutil.copytree(EXAMPLE, self.spec.parent, ignore=shutil.ignore_patterns("autosearch_output"))
        self.seen: dict[str, int] = {}  # study name -> trials already counted
        self.log_offset = 0

    def compile(self, n_trials: int) -> None:
        from ruamel.yaml import YAML

        yaml = YAML()
        data = yaml.load(self.spec)
        data["search"]["engine"] = self.engine
        data["search"]["n_trials"] = n_trials
        yaml.dump(data, self.spec)
        self.out = self.spec.parent / data["output"]["dir"]
        run(self.engine, "compile", [sys.executable, "-m", "compiler", "compile", str(self.spec)], REPO)
        manifest = YAML(typ="safe").load(self.out / "run_manifest.yaml")
        self.script = self.out / manifest["outputs"]["script"]
        study = manifest["outputs"]["study"]
        self.storage = f"sqlite:///{self.out / study['db']}"
        self.study = study["name"]
        self.grid_study = study.get("grid_name", self.study + "-grid") if self.engine == "qas" else None

    def search(self) -> dict[str, Any]:
        start_ns = time.time_ns()
        start = time.perf_counter()
        run(self.engine, "search", [sys.executable, str(self.script)], self.spec.parent)
        wall = time.perf_counter() - start
        sampler = self.new_trials(self.study)
        if self.grid_study is not None:
            grid = self.new_trials(self.grid_study)
            configs = {canonical(t.user_attrs["config"]) for t in sampler + grid
                       if "config" in t.user_attrs and "reused_from" not in t.user_attrs}
            grid_runs = len(grid)
        else:
            logged = self.new_log_text()
            configs = {canonical(ast.literal_eval(m)) for m in LOGGED_CONFIG.findall(logged)}
            grid_runs = logged.count("Grid search params:")
        files = [p for p in self.out.rglob("*") if p.is_file()]
        written = [p for p in files if p.match("quantized_model*.onnx") and p.stat().st_mtime_ns >= start_ns]
        return {
            "wall_s": round(wall, 3),
            "sampler_trials": len(sampler),
            "grid_runs": grid_runs,
            "trials": len(sampler) + grid_runs,
            "configs_quantized": len(configs),
            "models_written": len(written),
            "best_value": json.loads((self.out / "best_config.json").read_text(encoding="utf-8"))["value"],
            "disk_bytes": sum(p.stat().st_size for p in files),
        }

    def new_trials(self, name: str) -> list[Any]:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if name not in optuna.get_all_study_names(self.storage):
            return []
        trials = optuna.load_study(study_name=name, storage=self.storage).get_trials(deepcopy=False)
        new, self.seen[name] = trials[self.seen.get(name, 0):], len(trials)
        return new

    def new_log_text(self) -> str:
        log = self.out / QUARK_LOG
        if not log.is_file():
            return ""
        data = log.read_bytes()
        text, self.log_offset = data[self.log_offset:].decode("utf-8", "replace"), len(data)
        return text

    def best_config_keys(self) -> list[str]:
        return sorted(json.loads((self.out / "best_config.json").read_text(encoding="utf-8")))


def run(engine: str, step: str, argv: list[str], cwd: Path) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        stream, text = ("stderr", proc.stderr) if proc.stderr.strip() else ("stdout", proc.stdout)
        tail = "\n".join(text.strip().splitlines()[-20:])
        raise EngineFailed(f"engine {engine}: {step} failed with exit code {proc.returncode}: "
                           f"{' '.join(argv)}\n--- {stream} tail ---\n{tail}")


def canonical(config: Any) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def ratio(a: float, b: float) -> float | None:
    return None if b == 0 else round(a / b, 3)


def compare(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    q, a = results["qas"], results["autosearchpro"]
    ratios = {k: ratio(q[k], a[k]) for k in ("wall_s", "trials", "configs_quantized", "disk_bytes")}
    agree = math.isclose(q["best_value"], a["best_value"], rel_tol=1e-9, abs_tol=1e-12)
    return {"engines": results, "ratios": ratios, "best_values_agree": agree}


def benchmark(root: Path, n_trials: int, extend: int) -> dict[str, Any]:
    engines = {name: Engine(root, name) for name in ENGINES}
    plan = [("first run", n_trials, True), ("re-run", n_trials, False)]
    if extend:
        plan.append((f"extended (+{extend})", n_trials + extend, True))
    rounds = []
    for index, (label, trials, recompile) in enumerate(plan):
        order = ENGINES if index % 2 == 0 else ENGINES[::-1]  # alternate who goes first: drift hits both
        results = {}
        for name in order:
            if recompile:
                engines[name].compile(trials)
            results[name] = engines[name].search()
        rounds.append({"round": label, "n_trials": trials, **compare({n: results[n] for n in ENGINES})})
    keys = {name: e.best_config_keys() for name, e in engines.items()}
    return {
        "spec": "specs/example", "n_trials": n_trials, "extend": extend, "rounds": rounds,
        "best_config_keys": {"common": sorted(set(keys["qas"]) & set(keys["autosearchpro"])),
                             "only_qas": sorted(set(keys["qas"]) - set(keys["autosearchpro"])),
                             "only_autosearchpro": sorted(set(keys["autosearchpro"]) - set(keys["qas"]))},
        "how_counted": HOW_COUNTED,
    }


def print_table(report: dict[str, Any]) -> None:
    rows = [("wall time (s)", "wall_s"), ("sampler trials", "sampler_trials"), ("grid-stage runs", "grid_runs"),
            ("trials executed", "trials"), ("configs quantized", "configs_quantized"),
            ("models written", "models_written"), ("best value", "best_value"), ("disk (bytes)", "disk_bytes")]
    for r in report["rounds"]:
        print(f"\n{r['round']} (n_trials {r['n_trials']})")
        print(f"  {'':<18} {'qas':>12} {'autosearchpro':>14} {'qas/asp':>8}")
        for title, key in rows:
            q, a = r["engines"]["qas"][key], r["engines"]["autosearchpro"][key]
            if key == "best_value":
                shown = "agree" if r["best_values_agree"] else "DIFFER"
                print(f"  {title:<18} {q:>12.6g} {a:>14.6g} {shown:>8}")
                continue
            rat = r["ratios"].get(key, "")
            rat = "-" if rat is None else (f"{rat:.2f}" if rat != "" else "")
            print(f"  {title:<18} {q:>12} {a:>14} {rat:>8}")
    keys = report["best_config_keys"]
    print(f"\nbest_config.json keys only in qas: {', '.join(keys['only_qas']) or 'none'}; "
          f"only in autosearchpro: {', '.join(keys['only_autosearchpro']) or 'none'}")
    print("how each number was obtained:")
    for key, how in report["how_counted"].items():
        print(f"  {key}: {how}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, default=20, help="sampler trials of the first two rounds (default 20)")
    parser.add_argument("--extend", type=int, default=5, help="trials added for round 3; 0 skips it (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir with both engines' outputs")
    args = parser.parse_args()
    if args.n_trials < 1 or args.extend < 0:
        parser.error("--n-trials must be >= 1 and --extend >= 0")
    root = Path(tempfile.mkdtemp(prefix="qas-bench-engines-"))
    try:
        report = benchmark(root, args.n_trials, args.extend)
    except EngineFailed as failure:
        print(f"engines: {failure}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"engines: outputs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
