"""Several workers end to end with the real amd-quark on CPU: `qas run --workers 2` on the journal file; a worker
SIGKILLed mid-trial on the journal file and on a real PostgreSQL server, whose configuration another worker finishes,
with the budget exact, nothing RUNNING and nothing quantized twice, and best_config.json naming the study's best."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .conftest import HANG_SPEC, compile_hanging, needs_quark, qas

pytestmark = [pytest.mark.e2e, needs_quark]

def compiled(folder: Path, extra: str = "") -> Path:
    return compile_hanging(folder, 4, extra)


def kill_the_hanging_worker(folder: Path, processes: list[subprocess.Popen]) -> int:
    """Wait until a worker hangs in a trial, SIGKILL it; its pid out."""
    deadline = time.monotonic() + 240
    while not (folder / "hanging").exists() or not (folder / "hanging").read_text():
        assert time.monotonic() < deadline, "no worker reached a quantized model"
        assert any(p.poll() is None for p in processes), [p.communicate() for p in processes]
        time.sleep(0.2)
    pid = int((folder / "hanging").read_text())
    os.kill(pid, signal.SIGKILL)
    return pid


def report(out: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "compiler", "report", str(out), "--format", "json"],
                          capture_output=True, text=True, env=env or os.environ.copy(), timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_exact(r: dict[str, Any], n_trials: int, killed_pid: int | None) -> None:
    """The budget is exact, nothing runs, each configuration was quantized once, a killed trial was retried."""
    trials = r["all_trials"]
    assert not [t for t in trials if t["state"] in ("RUNNING", "WAITING")]
    complete = [t for t in trials if t["state"] == "COMPLETE"]
    assert len([t for t in complete if t["stage"] == "sampler"]) == n_trials
    quantized = Counter(json.dumps(t["config"], sort_keys=True) for t in complete if t["reused_from"] is None)
    assert max(quantized.values()) == 1
    failed = [t for t in trials if t["state"] == "FAIL"]
    if killed_pid is None:
        assert not failed
        return
    assert len(failed) == 1 and failed[0]["interrupted"] and failed[0]["worker"].endswith(f":{killed_pid}")
    retried = [t for t in complete if t["retried_from"] == failed[0]["number"]]
    assert len(retried) == 1 and retried[0]["config"] == failed[0]["config"]
    assert not retried[0]["worker"].endswith(f":{killed_pid}")
    assert r["trials"]["failed"] == 0


# Scores a model by its file size; a quantized model's score is held back until some trial other than its own has left
# WAITING. While a worker waits here it claims nothing, so that trial is the other worker's: both workers get a trial
# however fast either starts. A runtime that never lets the second worker claim one holds the first for 300 s, then
# fails the test's count of workers.
BARRIER_EVALUATOR = '''import os, re, time
from pathlib import Path

JOURNAL = Path(__file__).parent / "autosearch_output" / "small_study.journal"


def another_trial_claimed(mine):
    import optuna

    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(JOURNAL)))
    study = next(s for s in storage.get_all_studies() if not s.study_name.endswith("-grid"))
    return any(t.number != mine and t.state.name != "WAITING" for t in storage.get_all_trials(study._study_id))


def size(model_path):
    found = re.search(r"sampler_(\\d+)\\.onnx$", model_path)
    if found:
        deadline = time.monotonic() + 300
        while not another_trial_claimed(int(found.group(1))) and time.monotonic() < deadline:
            time.sleep(0.2)
    return os.path.getsize(model_path)
'''


def test_qas_run_with_two_workers_on_the_journal_file_completes_the_budget_exactly(example_copy: Path) -> None:
    (example_copy / "spec.yaml").write_text(HANG_SPEC.replace("N_TRIALS", "4"))
    (example_copy / "evals.py").write_text(BARRIER_EVALUATOR)
    done = qas("run", "spec.yaml", "--yes", "--workers", "2", cwd=example_copy, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "qas: 2 workers started" in done.stderr + done.stdout
    spec = example_copy / "autosearch_output" / "small_autosearch.py"
    r = report(spec.parent)
    assert_exact(r, 4, None)
    assert len(r["workers"]) == 2, r["workers"]  # both worked: guaranteed by the evaluator's barrier
    best = json.loads((spec.parent / "best_config.json").read_text())
    assert best["value"] == min(t["value"] for t in r["all_trials"] if t["state"] == "COMPLETE")
    assert (spec.parent / "best_model.onnx").is_file()
    status = qas("status", str(spec.parent))
    assert status.returncode == 0 and "4 of 4 sampler trials complete (budget reached)" in status.stdout
    assert sum(line.startswith("  0@") or line.startswith("  1@") for line in status.stdout.splitlines()) == 2


def test_a_worker_sigkilled_mid_trial_is_replaced_by_the_other_on_the_journal_file(example_copy: Path) -> None:
    spec = compiled(example_copy)
    launcher = subprocess.Popen([sys.executable, str(spec), "--workers", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    pid = kill_the_hanging_worker(example_copy, [launcher])
    out, err = launcher.communicate(timeout=600)
    assert launcher.returncode == 0, out + err  # the other worker finished the budget
    assert "ended with killed by SIGKILL" in err
    assert_exact(report(spec.parent), 4, pid)


def test_two_workers_on_postgresql_one_sigkilled_mid_trial(example_copy: Path, postgres: Any) -> None:
    spec = compiled(example_copy, "storage: {url_env: QAS_STORAGE_URL, heartbeat: 1s, grace_period: 3s}\n")
    env = os.environ | {"QAS_STORAGE_URL": postgres.new_database()}
    workers = [subprocess.Popen([sys.executable, str(spec), "--worker", "--worker-index", str(k)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for k in range(2)]
    pid = kill_the_hanging_worker(example_copy, workers)
    survivor = next(w for w in workers if w.pid != pid)
    out, err = survivor.communicate(timeout=600)
    assert survivor.returncode == 0, out + err
    r = report(spec.parent, env)
    assert_exact(r, 4, pid)
    best = json.loads((spec.parent / "best_config.json").read_text())
    assert best["value"] == min(t["value"] for t in r["all_trials"] if t["state"] == "COMPLETE")
    killed = next(w for w in workers if w.pid == pid)
    killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL


def test_ctrl_c_stops_every_worker_cleanly_and_a_rerun_finishes_the_budget(example_copy: Path) -> None:
    spec = compiled(example_copy)
    launcher = subprocess.Popen([sys.executable, str(spec), "--workers", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (example_copy / "hanging").exists() or not (example_copy / "hanging").read_text():
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.2)
    # what Ctrl-C in a terminal gives the launcher (its workers have their own group)
    launcher.send_signal(signal.SIGINT)
    out, err = launcher.communicate(timeout=180)
    assert launcher.returncode == 130, out + err
    assert err.count("SIGINT received") == 2 and "Traceback" not in err  # passed on to both workers, once
    r = report(spec.parent)
    assert not [t for t in r["all_trials"] if t["state"] == "RUNNING"]
    stopped = [t for t in r["all_trials"] if t["state"] == "FAIL"]
    assert stopped and all(t["interrupted"] for t in stopped) and r["trials"]["failed"] == 0, [
        (t["number"], t["worker"], t["error"]) for t in stopped]
    (example_copy / "hang").unlink()
    rerun = subprocess.run([sys.executable, str(spec), "--workers", "2"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    trials = report(spec.parent)["all_trials"]
    assert len([t for t in trials if t["state"] == "COMPLETE" and t["stage"] == "sampler"]) == 4
    assert not [t for t in trials if t["state"] in ("RUNNING", "WAITING")]
