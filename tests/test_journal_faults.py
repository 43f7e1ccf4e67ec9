"""The journal file changed under a running search (truncated, deleted, made read-only): the worker stops within
seconds with one line naming the file and what to do, never a traceback or a hang; `qas status` and `qas report` on
such a folder say the same kind of thing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compiler.back.emit import write_atomically
from compiler.commands.pipeline import compile_spec
from compiler.runtime import contract
from compiler.runtime.search import Search

from .conftest import REPO, qas, settings_from_script

# One worker process over the fake quantizer (conftest), slow enough that the fault lands mid-run: each quantization
# takes 0.2 s and is logged, so the test knows the search is under way.
WORKER = """
    import json, sys, time
    from pathlib import Path
    import optuna
    from tests.conftest import FakeQuark, fake_settings, product_configs
    from compiler.runtime.search import Search
    from compiler.runtime.space import stage_configs

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder = Path(sys.argv[1])
    settings = fake_settings(folder, n_trials=60)
    search = Search(settings)
    fake = FakeQuark()

    def quantize(config, output):
        time.sleep(0.2)
        fake.quantize(config, output)
        with open(folder / "quantized.log", "a") as handle:
            handle.write(json.dumps(config) + "\\n")

    search.attach(quantize, fake.score)
    search.run(stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                             product_configs))
    print("finished", flush=True)
"""


def read_only(path: Path) -> None:
    """Make `path` unwritable, also for root (which chmod does not bind): chattr +i where the file system has it."""
    path.chmod(0o444)
    if os.geteuid() == 0 and (shutil.which("chattr") is None
                              or subprocess.run(["chattr", "+i", str(path)]).returncode != 0):
        pytest.skip("running as root without chattr +i: a file cannot be made unwritable here")


def writable(path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("chattr") and path.exists():
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    if path.exists():
        path.chmod(0o644)


def truncate(path: Path, mid_line: bool) -> None:
    data = path.read_bytes()
    if mid_line:
        cut = len(data) // 2
        cut += 1 if data[cut - 1:cut] == b"\n" else 0  # inside a record, not at its end
    else:  # at a record's end: fewer records than the worker has read
        cut = data.index(b"\n", len(data) // 3) + 1
    with open(path, "r+b") as handle:
        handle.truncate(cut)


FAULTS = {
    "truncated mid-line": (lambda p: truncate(p, mid_line=True), "was truncated or rewritten while the search ran",
                           "restore it from a copy and re-run to resume"),
    "truncated to fewer records": (lambda p: truncate(p, mid_line=False), "was truncated or rewritten",
                                   "restore it from a copy and re-run to resume"),
    "deleted": (lambda p: p.unlink(), "was deleted while the search ran", "restore it from a copy"),
    "read-only": (read_only, "cannot be written (PermissionError", "make it writable again (chmod u+w"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_journal_changed_under_a_running_worker_stops_it_cleanly_within_seconds(tmp_path: Path, fault: str) -> None:
    journal = tmp_path / "fake_study.journal"
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER), str(tmp_path)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        log = tmp_path / "quantized.log"
        while not (log.exists() and len(log.read_text().splitlines()) >= 3):  # under way
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        damage, said, todo = FAULTS[fault]
        damage(journal)
        faulted = time.monotonic()
        out, err = worker.communicate(timeout=90)  # a hang would run into this
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
        writable(journal)
    assert time.monotonic() - faulted < 60, "stopped, but not soon"
    assert worker.returncode == contract.EXIT_FAILED, err[-3000:]
    assert "finished" not in out and "Traceback" not in err, err[-3000:]
    assert f"qas: error: the study file {journal} {said}" in err and todo in err, err[-3000:]


def compiled_with_trials(example: Path) -> tuple[Path, Path]:
    """The example compiled, its journal written by the runtime with a few trials run; (output folder, journal)."""
    result = compile_spec(example / "spec.yaml")
    assert result.ok and not write_atomically(result.files, result.out_dir)
    script = result.out_dir / result.plan.script
    settings = settings_from_script(script.read_text(), script)
    search = Search(settings)
    for value in (0.5, 0.25):
        study, trial, stage = search.slots.claim(search.worker)
        trial.set_user_attr(contract.ATTR_STAGE, stage)
        study.tell(trial, value)
    return result.out_dir, result.out_dir / settings.study_db


@pytest.mark.parametrize("fault", ["truncated mid-line", "deleted"])
def test_status_and_report_on_a_damaged_or_deleted_journal_name_it_and_what_to_do(example_copy: Path,
                                                                                  fault: str) -> None:
    out, journal = compiled_with_trials(example_copy)
    FAULTS[fault][0](journal)
    for command in ("status", "report"):
        done = qas(command, str(out))
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert str(journal) in done.stderr, done.stderr
        if fault == "deleted":
            assert "the file was deleted (restore it from a copy to keep its trials" in done.stderr
        else:
            assert "cut off in its last line" in done.stderr and "restore it from a copy, or move it away" \
                in done.stderr


def test_status_and_report_read_a_read_only_journal(example_copy: Path) -> None:
    out, journal = compiled_with_trials(example_copy)
    read_only(journal)
    try:
        for command in ("status", "report"):
            done = qas(command, str(out))
            assert done.returncode == 0, done.stderr
    finally:
        writable(journal)
