"""Engine qas end to end with the real amd-quark on CPU: interrupt and resume, failing trials, pruning, keep_float."""

from __future__ import annotations

import ast
import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import onnx
import optuna
import pytest

from compiler.report import build_report

from .conftest import (
    EXAMPLE_DIR,
    compile_and_run,
    needs_quark,
    run_script,
    study_storage,
)

pytestmark = [pytest.mark.e2e, needs_quark]

QDQ = {"QuantizeLinear", "DequantizeLinear", "ExtendedQuantizeLinear", "ExtendedDequantizeLinear"}

SMALL_SPEC = """qas: 1
name: small
model: models/tinycnn.onnx
calibration: {{folder: data/calib, limit: 4}}
evaluation: {evaluation}
search:
  space:
    activation: [Int8Spec]
    activation_params:
      calibration_method: [MinMax, Percentile, Entropy]
      only_if: activation
    weight: [Int8Spec, Int16Spec]
    weight_params:
      symmetric: [true, false]
      only_if: weight
  sampler: TPE
  seed: 3
  n_trials: {n_trials}
  max_failures: 2
device: cpu
{extra}"""


def studies(out: Path, name: str) -> tuple[optuna.Study, optuna.Study]:
    storage = study_storage(out / (name + '_study.journal'))
    manifest_name = next(s.study_name for s in optuna.get_all_study_summaries(storage)
                         if not s.study_name.endswith("-grid"))
    return (optuna.load_study(study_name=manifest_name, storage=storage),
            optuna.load_study(study_name=manifest_name + "-grid", storage=storage))


def states(study: optuna.Study) -> list[str]:
    """The states of the trials that ran (queued slots still WAITING left out)."""
    return [t.state.name for t in study.trials if t.state.name != "WAITING"]


def test_interrupted_run_resumes_to_exactly_the_budget_without_repeating_a_configuration(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    spec.write_text(spec.read_text().replace("n_trials: 3", "n_trials: 5"))
    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    out = example_copy / "autosearch_output"
    script = out / "tinycnn_autosearch.py"
    # Ctrl-C after the second sampler trial is scored: like a user stopping a long run.
    # One pipe for both streams: Quark logs a lot to stderr, and an unread pipe would block the script.
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if line.startswith("qas: sampler trial 1:"):
            proc.send_signal(signal.SIGINT)
            break
    err, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted after" in err and "re-run to resume" in err
    sampler, grid = studies(out, "tinycnn")
    assert states(grid) == ["COMPLETE"] * 3
    done_before = [t for t in sampler.trials if t.state.name == "COMPLETE"]
    assert 2 <= len(done_before) < 5

    resumed = run_script(script)
    assert "grid trial" not in resumed.stdout  # the grid stage is never run again
    sampler, grid = studies(out, "tinycnn")
    assert states(grid) == ["COMPLETE"] * 3
    complete = [t for t in sampler.trials if t.state.name == "COMPLETE"]
    assert len(complete) == 5  # exactly the total budget
    assert [t.number for t in done_before] == [t.number for t in complete[:len(done_before)]]
    quantized = [json.dumps(t.user_attrs["config"], sort_keys=True) for t in complete
                 if "reused_from" not in t.user_attrs]
    assert len(quantized) == len(set(quantized))  # no configuration quantized twice
    models = {t.user_attrs["model"] for t in complete}
    assert all((out / m).is_file() for m in models)
    best = json.loads((out / "best_config.json").read_text())
    winner = min(complete + list(grid.trials), key=lambda t: t.value)
    assert (best["trial_number"], best["value"]) == (winner.number, winner.value)
    assert (out / "best_model.onnx").read_bytes() == (out / best["model"]).read_bytes()
    # F4: the stage-1 winner's settings (e.g. OptimizeModel, calibration) are kept in stage 2
    assert best["stage"] == "grid" or "OptimizeModel" in best["config"]


def test_a_trial_that_raises_is_failed_and_the_study_completes(example_copy: Path) -> None:
    (example_copy / "evals.py").write_text(
        "import os\n\n\ndef size_or_raise(path):\n"
        "    if path.endswith('quantized_model_sampler_1.onnx'):\n"
        "        raise RuntimeError('evaluator broke on this one')\n"
        "    return os.path.getsize(path)\n")
    spec = example_copy / "spec.yaml"
    spec.write_text(SMALL_SPEC.format(evaluation="{evaluator: evals.py:size_or_raise, higher_is_better: false}",
                                      n_trials=3, extra=""))
    out, ran = compile_and_run(spec)
    assert ("sampler trial 1 failed (EvaluatorError: evaluator evals.py:size_or_raise raised RuntimeError: evaluator "
            "broke on this one at ") in ran.stderr  # the evaluator's file:line, its traceback: tests/test_evaluators.py
    sampler, grid = studies(out, "small")
    assert not grid.trials
    assert states(sampler) == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    assert sampler.trials[1].user_attrs["error"].startswith(
        "EvaluatorError: evaluator evals.py:size_or_raise raised RuntimeError: evaluator broke on this one at ")
    assert not (out / "quantized_model_sampler_1.onnx").exists()
    best = json.loads((out / "best_config.json").read_text())
    assert best["trials_complete"] == 3 and best["trials_failed"] == 1
    float_bytes = (example_copy / "models" / "tinycnn.onnx").stat().st_size  # what the evaluator gave the float model
    assert sampler.user_attrs["float_score"] == float_bytes and best["float_score"] == float_bytes
    report = build_report(out)  # lower is better: each value is the rise over the float score
    assert report["float_score"] == float_bytes and report["higher_is_better"] is False
    assert report["best"]["score"] == (out / report["best"]["model"]).stat().st_size  # the quantized model's own


def test_max_failures_stops_the_study(example_copy: Path) -> None:
    (example_copy / "evals.py").write_text(
        "import os\n\n\ndef flaky(path):\n"
        "    if 'quantized_model' in path:\n        raise ValueError('always')\n    return 1.0\n")
    spec = example_copy / "spec.yaml"
    spec.write_text(SMALL_SPEC.format(evaluation="{evaluator: evals.py:flaky, higher_is_better: true}",
                                      n_trials=3, extra=""))
    subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], check=True, capture_output=True)
    ran = subprocess.run([sys.executable, str(example_copy / "autosearch_output" / "small_autosearch.py")],
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 2
    assert "stopping: 2 trials failed (max_failures 2)" in ran.stderr and "no trial completed" in ran.stderr
    sampler, _ = studies(example_copy / "autosearch_output", "small")
    assert states(sampler) == ["FAIL", "FAIL"]


def test_an_evaluator_that_fails_on_the_float_model_stops_before_any_trial(example_copy: Path) -> None:
    (example_copy / "evals.py").write_text("def broken(path):\n    raise OSError('no labels file')\n")
    spec = example_copy / "spec.yaml"
    spec.write_text(SMALL_SPEC.format(evaluation="{evaluator: evals.py:broken, higher_is_better: true}",
                                      n_trials=3, extra=""))
    subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], check=True, capture_output=True)
    ran = subprocess.run([sys.executable, str(example_copy / "autosearch_output" / "small_autosearch.py")],
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 2
    assert ("qas: error: scoring the float model failed, so no trial could be scored: EvaluatorError: evaluator "
            "evals.py:broken raised OSError: no labels file at ") in ran.stderr
    assert not list((example_copy / "autosearch_output").glob("quantized_model*"))


BAD_EVALS = r'''import json
import os


def dets(outputs):
    return outputs["dets"]


def badly(path):
    with open(os.path.join(os.path.dirname(__file__), "seen.jsonl"), "a") as seen:
        seen.write(json.dumps([__file__, path]) + "\n")
    if path.endswith("quantized_model_sampler_0.onnx"):
        return dets({"scores": 1.0})
    if path.endswith("quantized_model_sampler_1.onnx"):
        return None
    if path.endswith("quantized_model_sampler_2.onnx"):
        return "0.75"
    return 0.5
'''


def test_an_evaluator_that_raises_or_returns_no_number_fails_its_trial_with_the_reason_and_traceback(
        example_copy: Path) -> None:
    """Issue 18.17: the reason and the traceback with the evaluator's file:line in the trial's error and search.log,
    and resolved paths for the evaluator's module and the models it gets."""
    user = example_copy / "user"
    user.mkdir()
    (user / "evals.py").write_text(BAD_EVALS)
    spec = example_copy / "spec.yaml"
    # the output folder is a sibling of user/: the script names the evaluator ../user/evals.py
    spec.write_text(SMALL_SPEC.format(evaluation="{evaluator: user/evals.py:badly, higher_is_better: true}",
                                      n_trials=1, extra="").replace("max_failures: 2", "max_failures: 4"))
    out, ran = compile_and_run(spec)
    file = (user / "evals.py").resolve()
    sampler, _ = studies(out, "small")
    assert states(sampler) == ["FAIL", "FAIL", "FAIL", "COMPLETE"]
    raised, none, text = (t.user_attrs["error"] for t in sampler.trials[:3])

    first, *trace = raised.splitlines()
    model = (out / "quantized_model_sampler_0.onnx").resolve()
    assert first == (f"EvaluatorError: evaluator evals.py:badly raised KeyError: 'dets' at {file}:6 in dets "
                     f"(scoring {model})")
    assert trace[0] == "Traceback (most recent call last):" and trace[-1] == "KeyError: 'dets'"
    assert f'  File "{file}", line 13, in badly' in trace and f'  File "{file}", line 6, in dets' in trace
    assert none.startswith(f"EvaluatorError: evaluator evals.py:badly ({file}) returned NoneType None for ")
    assert text.startswith(f"EvaluatorError: evaluator evals.py:badly ({file}) returned str '0.75' for ")
    assert none.endswith("it must return a real number (an int or a float; not a bool, a string or None)")

    assert f"sampler trial 0 failed ({first}); 1 of 4 failures allowed" in ran.stderr  # one line on the terminal
    log = (out / "search.log").read_text(encoding="utf-8", errors="replace")
    assert f"qas: {first.removeprefix('EvaluatorError: ')}\n" + "\n".join(trace) in log

    seen = [json.loads(line) for line in (user / "seen.jsonl").read_text().splitlines()]
    assert {module for module, _ in seen} == {str(file)}
    assert all(".." not in path and Path(path).is_absolute() for _, path in seen)
    assert seen[0][1] == str((example_copy / "models" / "tinycnn.onnx").resolve())  # the float model first


def test_keep_models_best_and_keep_float_are_applied(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    spec.write_text(SMALL_SPEC.format(evaluation="{metric: L2}", n_trials=4,
                                      extra="keep_float:\n  nodes: [fc]\n  op_types: [GlobalAveragePool]\n"
                                            "output:\n  keep_models: best\n"))
    out, _ = compile_and_run(spec)
    left = sorted(p.name for p in out.glob("quantized_model*.onnx"))
    best = json.loads((out / "best_config.json").read_text())
    assert left == [best["model"]]  # keep_models: best leaves one model, the winner
    model = onnx.load(str(out / "best_model.onnx"))
    produced_by = {o: n for n in model.graph.node for o in n.output}
    nodes = {n.name: n for n in model.graph.node}
    consumers = {i: n for n in model.graph.node for i in n.input}
    # A float node's own output is not quantized (its input may still be the previous node's quantized
    # output, dequantized), and fc's weights stay float: without keep_float both are QDQ (see the Quark table).
    for kept_float in ("fc", "pool"):
        after = [consumers.get(o) for o in nodes[kept_float].output]
        assert not any(c is not None and c.op_type in QDQ for c in after), kept_float
    weight = produced_by.get(nodes["fc"].input[1])
    assert weight is None or weight.op_type not in QDQ
    conv_inputs = [produced_by.get(i) for i in nodes["conv2"].input]
    assert any(p is not None and p.op_type in QDQ for p in conv_inputs)  # the rest is quantized


LOGGED_CONFIG = re.compile(r"^(?:Grid search params:|\[Trial \d+\] Params: )(\{.*\})$", re.M)  # Quark's log lines


def canonical(config: dict) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def test_both_engines_quantize_the_same_configurations(tmp_path: Path) -> None:
    quantized = {}
    for engine in ("qas", "autosearchpro"):
        root = tmp_path / engine
        shutil.copytree(EXAMPLE_DIR, root, ignore=shutil.ignore_patterns("autosearch_output", "__pycache__"))
        spec = root / "spec.yaml"
        spec.write_text(spec.read_text().replace("  n_trials:", f"  engine: {engine}\n  n_trials:"))
        out, _ = compile_and_run(spec)
        if engine == "qas":
            sampler, grid = studies(out, "tinycnn")
            quantized[engine] = sorted(canonical(t.user_attrs["config"]) for t in grid.trials + sampler.trials
                                       if "reused_from" not in t.user_attrs)
        else:
            logged = (out / "auto_search.log").read_text(encoding="utf-8", errors="replace")
            quantized[engine] = sorted(canonical(ast.literal_eval(m)) for m in LOGGED_CONFIG.findall(logged))
    assert len(quantized["qas"]) == 6  # 3 grid configurations, then 3 sampler trials
    assert quantized["qas"] == quantized["autosearchpro"]
