"""Engine qas end to end with the real amd-quark: SIGINT (even when started ignored), SIGTERM and SIGKILL mid-trial,
then a re-run resumes to the budget; a second run of the same study is refused while the first is alive."""

from __future__ import annotations

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
    """Start the script (SIGINT ignored, as nohup or `&` in a script leave it, if asked) and wait until a trial hangs."""
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


def resume_to_the_budget(example_copy: Path, script: Path) -> subprocess.CompletedProcess:
    (example_copy / "hang").unlink()
    resumed = run_script(script)
    done = [t for t in trials(script) if t.state.name == "COMPLETE"]
    assert len(done) == 2 and "best value" in resumed.stdout
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
