"""Engine qas end to end with the real amd-quark: SIGINT (even when started ignored), SIGTERM and SIGKILL mid-trial,
then a re-run resumes to the budget; a second run of the same study is refused while the first is alive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from .conftest import compile_hanging, needs_quark, run_script, study_storage

pytestmark = [pytest.mark.e2e, needs_quark]

def compiled(example_copy: Path) -> Path:
    return compile_hanging(example_copy, 2)


def start_hanging(script: Path, log: Path, ignore_sigint: bool = False) -> subprocess.Popen:
    """Start the script (SIGINT ignored, as nohup or `&` in a script leave it, if asked) and wait until a trial
    hangs."""
    def preexec() -> None:
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen([sys.executable, str(script)], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            preexec_fn=preexec)
    hanging = script.parent.parent / "hanging"
    deadline = time.monotonic() + 240
    while not hanging.exists():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no trial started"
        time.sleep(0.2)
    return proc


def trials(script: Path) -> list[optuna.trial.FrozenTrial]:
    storage = study_storage(script.parent / 'small_study.journal')
    name = next(s.study_name for s in optuna.get_all_study_summaries(storage) if not s.study_name.endswith("-grid"))
    return optuna.load_study(study_name=name, storage=storage).trials


def resume_to_the_budget(example_copy: Path, script: Path, budget: int = 2) -> subprocess.CompletedProcess:
    (example_copy / "hang").unlink()
    resumed = run_script(script)
    done = [t for t in trials(script) if t.state.name == "COMPLETE"]
    assert len(done) == budget and "best value" in resumed.stdout
    return resumed


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_trial_in_hand_as_interrupted_and_a_rerun_resumes(example_copy: Path, tmp_path: Path,
                                                                              signum: int) -> None:
    script = compiled(example_copy)
    log = tmp_path / "run.log"
    proc = start_hanging(script, log, ignore_sigint=signum == signal.SIGINT)
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == 130, log.read_text()[-3000:]
    text = log.read_text()
    assert f"qas: {signal.Signals(signum).name} received" in text and "re-run to resume" in text
    (stopped,) = [t for t in trials(script) if t.state.name == "FAIL"]
    assert stopped.state.name == "FAIL" and stopped.user_attrs["interrupted"] is True  # not a failure
    assert not (script.parent / f"quantized_model_sampler_{stopped.number}.onnx").exists()
    resume_to_the_budget(example_copy, script)


def test_a_second_run_is_refused_naming_the_first_and_a_sigkilled_trial_is_reclaimed(example_copy: Path,
                                                                                       tmp_path: Path) -> None:
    script = compiled(example_copy)
    first = start_hanging(script, tmp_path / "first.log")
    second = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert second.returncode == 2
    assert f"another search is running on small_study.journal: pid {first.pid} on " in second.stderr
    assert "Traceback" not in second.stderr

    first.send_signal(signal.SIGKILL)  # no handler runs: the trial is left RUNNING, the OS frees the lock
    first.wait(timeout=30)
    assert [t.state.name for t in trials(script) if t.state.name != "WAITING"] == ["RUNNING"]
    resumed = resume_to_the_budget(example_copy, script)
    assert "1 trial(s) left RUNNING by a worker that is gone were marked interrupted and queued again" in resumed.stdout
    killed = trials(script)[0]
    assert killed.state.name == "FAIL" and killed.user_attrs["interrupted"] is True
    assert killed.user_attrs["error"].startswith("interrupted: its worker 0@")
    retried = [t for t in trials(script) if t.user_attrs.get("retried_from") == killed.number]
    assert [t.state.name for t in retried] == ["COMPLETE"] and retried[0].params == killed.params
    assert os.path.exists(script.parent / "small_study.journal.lock")


# A search whose only trial fine-tunes with AdaRound for far longer than any test waits: a stop must end it anyway
ADAROUND_SPEC = """qas: 1
name: small
model: models/tinycnn.onnx
calibration: {folder: data/calib, limit: 4}
evaluation: {metric: L2}
search:
  space:
    activation: [Int8Spec]
    weight: [Int8Spec]
    algorithms: [adaround]
    adaround_params:
      num_iterations: [1, 10000000]
      only_if: {algorithms: adaround}
  sampler: Grid
  seed: 3
  n_trials: 2
device: cpu
"""


def start_fine_tuning(example_copy: Path, log: Path, qas_run: bool = False) -> tuple[subprocess.Popen, Path]:
    """Compile ADAROUND_SPEC and start its script (or `qas run` on it); wait until the long grid trial (index 1) is a
    few seconds into Quark's fine-tuning. The process and the script out."""
    (example_copy / "spec.yaml").write_text(ADAROUND_SPEC)
    done = subprocess.run([sys.executable, "-m", "compiler", "compile", str(example_copy / "spec.yaml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    script = example_copy / "autosearch_output" / "small_autosearch.py"
    argv = ["-m", "compiler", "run", str(example_copy / "spec.yaml"), "--yes"] if qas_run else [str(script)]
    proc = subprocess.Popen([sys.executable, *argv], stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=example_copy)
    deadline = time.monotonic() + 300
    while not [t for t in trials_if_any(script) if t.state.name == "RUNNING" and t.user_attrs.get("grid_index") == 1
               and "config" in t.user_attrs]:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no trial started"
        time.sleep(0.5)
    time.sleep(5)  # calibration done, AdaRound under way
    return proc, script


def all_trials(script: Path) -> list[optuna.trial.FrozenTrial]:
    """The trials of both studies (the grid stage's first)."""
    storage = study_storage(script.parent / "small_study.journal")
    names = sorted((s.study_name for s in optuna.get_all_study_summaries(storage)),
                   key=lambda n: not n.endswith("-grid"))
    return [t for name in names for t in optuna.load_study(study_name=name, storage=storage).trials]


def trials_if_any(script: Path) -> list[optuna.trial.FrozenTrial]:
    """The trials once the script has made its study (reading never creates the journal), else none."""
    journal = script.parent / "small_study.journal"
    if not journal.exists() or journal.stat().st_size == 0:
        return []
    try:
        return all_trials(script)
    except (StopIteration, KeyError, ValueError, OSError):
        return []


def descendants(pid: int) -> list[int]:
    """The processes below `pid` now (its children, theirs, ...), from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        below = [p for p, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def ended(pids: list[int], timeout: float) -> bool:
    """Every pid has exited (or is a zombie nobody reaped) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.5)
    return False


def test_sigterm_during_adaround_stops_within_seconds_writes_the_best_so_far_and_a_rerun_resumes(
        example_copy: Path, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    proc, script = start_fine_tuning(example_copy, log)
    below = descendants(proc.pid)  # the quantizer's child process
    proc.send_signal(signal.SIGTERM)  # Quark swallows it while AdaRound runs: the child is killed instead
    started = time.monotonic()
    try:
        assert proc.wait(timeout=120) == 130, log.read_text()[-3000:]
    finally:
        proc.kill()
    assert time.monotonic() - started < 60 and below and ended(below, 30)
    text = log.read_text()
    assert "SIGTERM received" in text and "best so far" in text and "Traceback" not in text
    (stopped,) = [t for t in all_trials(script) if t.state.name == "FAIL"]
    assert (stopped.user_attrs["interrupted"] is True
            and not [t for t in all_trials(script) if t.state.name == "RUNNING"])
    out = script.parent
    best = json.loads((out / "best_config.json").read_text())
    assert best["trial_number"] == 0 and (out / "best_model.onnx").is_file()  # the completed trial's
    assert not (out / f"quantized_model_grid_{stopped.number}.onnx").exists()

    again = tmp_path / "again.log"  # a re-run resumes: the interrupted configuration runs again, and stops again
    proc, _ = start_fine_tuning(example_copy, again)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130, again.read_text()[-3000:]
    retried = [t for t in all_trials(script) if t.user_attrs.get("grid_index") == 1]
    assert [t.state.name for t in retried] == ["FAIL", "FAIL"] and all(t.user_attrs["interrupted"] for t in retried)


def test_sigterm_to_qas_run_during_adaround_records_an_interrupted_run_with_exit_130_and_the_best_so_far(
        example_copy: Path, tmp_path: Path) -> None:
    from ruamel.yaml import YAML

    log = tmp_path / "qas_run.log"
    proc, script = start_fine_tuning(example_copy, log, qas_run=True)
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=150) == 130, log.read_text()[-3000:]
    finally:
        proc.kill()
    run = YAML(typ="safe").load((script.parent / "run_manifest.yaml").read_text())["run"]
    assert (run["status"], run["exit_code"]) == ("interrupted", 130)
    assert run["outputs"]["best_config"] == "best_config.json" and run["outputs"]["trials_complete"] == 1


def test_a_sigkilled_qas_run_takes_its_search_with_it_and_a_rerun_reclaims_the_trial(example_copy: Path,
                                                                                     tmp_path: Path) -> None:
    log = tmp_path / "qas_run.log"
    proc, script = start_fine_tuning(example_copy, log, qas_run=True)
    below = descendants(proc.pid)  # the script and its quantizer process
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(below) >= 2 and ended(below, 90), "the search outlived `qas run`"
    stopped = [t for t in all_trials(script) if t.user_attrs.get("grid_index") == 1]
    assert [t.state.name for t in stopped] == ["FAIL"] and stopped[0].user_attrs["interrupted"] is True
    search_log = (script.parent / "search.log").read_text()
    # the parent-death signal comes once per thread of the dying `qas run`: one clean stop, its lines in the log
    assert search_log.count(f"qas: the process that started this search (pid {proc.pid}) ended: stopping") == 1
    assert "BrokenPipeError" not in search_log and "Traceback" not in search_log

    again = tmp_path / "again.log"  # not refused: the retry of the interrupted trial runs
    proc, _ = start_fine_tuning(example_copy, again)
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=120) == 130, again.read_text()[-3000:]
    finally:
        proc.kill()
    retried = [t for t in all_trials(script) if t.user_attrs.get("grid_index") == 1]
    assert [t.state.name for t in retried] == ["FAIL", "FAIL"]


def test_a_sigkilled_launcher_takes_its_workers_with_it(example_copy: Path, tmp_path: Path) -> None:
    script = compile_hanging(example_copy, 4)
    log = tmp_path / "launcher.log"
    launcher = subprocess.Popen([sys.executable, str(script), "--workers", "2"], stdout=log.open("w"),
                                stderr=subprocess.STDOUT)
    hanging = script.parent.parent / "hanging"
    deadline = time.monotonic() + 300
    while not hanging.exists():
        assert launcher.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no trial started"
        time.sleep(0.2)
    workers = [p for p in descendants(launcher.pid) if "--worker" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(workers) == 2
    below = descendants(launcher.pid)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(timeout=30)
    assert ended(below, 90), "workers outlived their launcher"
    assert not [t for t in trials(script) if t.state.name == "RUNNING"]
    resume_to_the_budget(example_copy, script, budget=4)


def test_a_trial_past_its_time_limit_during_adaround_is_stopped_and_failed_and_the_search_ends(example_copy: Path,
                                                                                               tmp_path: Path) -> None:
    (example_copy / "spec.yaml").write_text(ADAROUND_SPEC.replace("  n_trials: 2",
                                                                  "  n_trials: 2\n  trial_timeout: 30"))
    done = subprocess.run([sys.executable, "-m", "compiler", "compile", str(example_copy / "spec.yaml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    script = example_copy / "autosearch_output" / "small_autosearch.py"
    try:
        ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as error:
        raise AssertionError("the time limit did not stop AdaRound") from error
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    (failed,) = [t for t in all_trials(script) if t.state.name == "FAIL"]
    assert failed.user_attrs["grid_index"] == 1 and not failed.user_attrs.get("interrupted")
    assert failed.user_attrs["error"] == ("TrialTimeout: the trial ran past search.trial_timeout (30 s) and was "
                                          "stopped")
    assert json.loads((script.parent / "best_config.json").read_text())["trial_number"] == 0


def test_qas_run_exits_128_plus_the_signal_when_the_search_is_killed_by_one(example_copy: Path,
                                                                           tmp_path: Path) -> None:
    """A search killed by a signal nobody asked for (here SIGKILL, as the OOM killer sends) makes `qas run` exit as a
    shell would (128 + 9 = 137), not with Python's wrap-around of -9 (247); the run is recorded as failed."""
    compiled(example_copy)
    log = (tmp_path / "qas_run.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "compiler", "run", str(example_copy / "spec.yaml"), "--yes"],
                            stdout=log, stderr=subprocess.STDOUT, cwd=example_copy)
    hanging = example_copy / "hanging"
    deadline = time.monotonic() + 240
    try:
        while not hanging.exists() or not hanging.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "qas_run.log").read_text()[-3000:]
            time.sleep(0.2)
        os.kill(int(hanging.read_text()), signal.SIGKILL)  # the evaluator runs in the search script itself
        assert proc.wait(timeout=120) == 128 + signal.SIGKILL
    finally:
        proc.kill()
    text = (tmp_path / "qas_run.log").read_text()
    assert "run failed (killed by SIGKILL" in text, text[-3000:]
