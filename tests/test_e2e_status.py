"""`qas status` end to end with the real amd-quark on CPU: a search SIGKILLed mid-trial is shown gone and not running
(not "running trial N, 727 s"), with its queued slots apart from its trials and the best named by its objective; a
re-run takes the trial back and the status then says the budget is reached."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import compile_hanging, needs_quark, qas

pytestmark = [pytest.mark.e2e, needs_quark]


def test_a_search_killed_mid_trial_is_shown_gone_and_a_rerun_finishes_it(example_copy: Path) -> None:
    script = compile_hanging(example_copy, 3)
    out = script.parent
    search = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    hanging = example_copy / "hanging"
    while not hanging.exists() or not hanging.read_text():
        assert search.poll() is None, search.communicate()
        assert time.monotonic() < deadline, "no trial reached a quantized model"
        time.sleep(0.2)
    pid = int(hanging.read_text())
    assert pid == search.pid  # one process: the evaluator hangs in the search itself
    running = qas("status", str(out))
    assert running.returncode == 0 and "(going on)" in running.stdout.splitlines()[0], running.stdout
    os.kill(pid, signal.SIGKILL)
    search.communicate(timeout=60)
    status = qas("status", str(out))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].endswith("(not running)"), status.stdout
    assert "running " not in status.stdout, status.stdout
    gone = [line for line in lines if f":{pid}: " in line]
    assert len(gone) == 1 and f"GONE (its process {pid} has ended): " in gone[0] and "left RUNNING" in gone[0], lines
    assert "re-run the script (or `qas run`) to resume" in status.stdout
    assert "trial(s) run" in lines[1]
    best = next(line for line in lines if line.startswith("best so far: "))
    assert best == "best so far: none yet" or best.startswith("best so far: size rise "), best  # evals.py:size
    (example_copy / "hang").unlink()
    rerun = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    done = qas("status", str(out)).stdout
    assert "(budget reached)" in done.splitlines()[0] and "GONE" not in done and "queued" not in done, done
    assert "best so far: size rise " in done and "(lower is better; " in done, done
