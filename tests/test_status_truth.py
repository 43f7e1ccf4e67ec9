"""`qas status` and `qas report` tell the truth about a real output folder (the example compiled, its journal written by
the runtime's Search without amd-quark): a dead worker from a live one, a stop rule from a reached budget, queued
slots apart from trials run, the best by its objective, a best_config.json not written yet, a study that is not
qas's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from compiler.back.emit import write_atomically
from compiler.commands.pipeline import compile_spec
from compiler.report import build_report, report_text
from compiler.report.status import status_text
from compiler.runtime import contract
from compiler.runtime.search import Search

from .conftest import qas, settings_from_script

optuna.logging.set_verbosity(optuna.logging.WARNING)


def compiled(example: Path) -> tuple[Path, Any]:
    """The example compiled into its output folder; (the folder, the script's runtime Settings) out."""
    result = compile_spec(example / "spec.yaml")
    assert result.ok and not write_atomically(result.files, result.out_dir)
    script = result.out_dir / result.plan.script
    return result.out_dir, settings_from_script(script.read_text(), script)


def dead_worker() -> str:
    """The worker name of a process of this machine that has ended."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    return f"0@{socket.gethostname()}:{int(ended.stdout)}"


def finish(search: Search, worker: str, value: float) -> Any:
    """Claim the next slot as `worker` and complete it with `value`, as a trial of the runtime records it."""
    study, trial, stage = search.slots.claim(worker)
    trial.set_user_attr(contract.ATTR_STAGE, stage)
    trial.set_user_attr(contract.ATTR_CONFIG, {"number": trial.number})
    trial.set_user_attr(contract.ATTR_MODEL, f"quantized_model_{stage}_{trial.number}.onnx")
    study.tell(trial, value)
    return trial


def test_a_dead_worker_s_trial_is_shown_gone_not_running(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    search = Search(settings)  # queues the grid stage's slots
    finish(search, search.worker, 0.25)
    gone = dead_worker()
    _, trial, _ = search.slots.claim(gone)  # RUNNING, and its process has ended: what a SIGKILLed worker leaves
    report = build_report(out)
    assert not isinstance(report, str), report
    text = status_text(report)
    assert "running grid trial" not in text, text
    assert f"{gone}: 0 complete; GONE (its process {gone.rsplit(':', 1)[1]} has ended): grid trial {trial.number} " \
           "left RUNNING" in text
    assert text.splitlines()[0].endswith("(not running)")
    assert "re-run the script (or `qas run`) to resume" in text
    row = next(t for t in report["all_trials"] if t["number"] == trial.number and t["state"] == "RUNNING")
    assert row["alive"] is False and report["state"] == "not running"


def test_a_live_worker_is_running_and_the_search_going_on(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    search = Search(settings)
    _, trial, _ = search.slots.claim(search.worker)  # this process: alive
    report = build_report(out)
    text = status_text(report)
    assert f"{search.worker}: 0 complete; running grid trial {trial.number}" in text and "GONE" not in text
    assert text.splitlines()[0].endswith("(going on)")


def test_queued_slots_are_counted_apart_from_trials_run_and_the_best_is_named(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    search = Search(settings)
    grid = settings.stage_totals()[0]
    finish(search, search.worker, 0.5)
    finish(search, search.worker, 0.25)
    report = build_report(out)
    assert report["trials"]["total"] == 2 and report["trials"]["waiting"] == grid - 2
    text = status_text(report)
    assert f"; 2 trial(s) run; {grid - 2} slot(s) queued, not yet run" in text
    assert "best so far: L2 0.25 (lower is better; grid trial 1)" in text
    block = report_text(report)
    assert f"; 2 trials run, {grid - 2} slot(s) queued, not yet run" in block and "trials recorded" not in block


def test_a_stop_rule_is_named_not_budget_reached(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    search = Search(settings)
    finish(search, search.worker, 0.25)
    for reason in ("tolerance", "timeout"):
        search.sampler_study.set_user_attr(contract.STOPPED_ATTR, {"reason": reason, "detail": "x", "at": "now"})
        report = build_report(out)
        assert status_text(report).splitlines()[0].endswith(f"(stopped: {reason})")
        assert "budget reached" not in status_text(report)


def test_an_interrupted_run_s_report_says_best_config_is_not_written_yet(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    search = Search(settings)
    finish(search, search.worker, 0.25)
    text = report_text(build_report(out))
    assert "best_config  not written yet" in text and "does NOT agree" not in text
    (out / "best_config.json").write_text(json.dumps({"value": 0.5, "trial_number": 0, "stage": "grid"}))
    assert "does NOT agree with the study" in report_text(build_report(out))


def foreign_study(out: Path, settings: Any) -> None:
    """Another program's study under the search's study name, in its journal: 3 complete trials, maximized."""
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / settings.study_db)))
    study = optuna.create_study(study_name=settings.study_name, storage=storage, direction="maximize")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)


def test_a_study_another_program_made_under_the_name_is_refused_everywhere(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    foreign_study(out, settings)
    found = build_report(out)
    assert isinstance(found, str) and f"study {settings.study_name!r}" in found and "is not a qas study" in found
    assert "delete or rename that study" in found
    for command in ("status", "report"):
        done = qas(command, str(out))
        assert done.returncode != 0 and "is not a qas study" in done.stderr and "Traceback" not in done.stderr
        assert "3 of" not in done.stdout and "maximize" not in done.stdout
    started = time.monotonic()
    ran = subprocess.run([sys.executable, str(out / settings.script)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == contract.EXIT_USAGE, ran.stderr[-2000:]
    assert "is not a qas study" in ran.stderr and "Traceback" not in ran.stderr and "KeyError" not in ran.stderr
    assert time.monotonic() - started < 120  # refused before any work
    assert not (out / "best_config.json").exists()


def test_a_qas_study_stays_a_qas_study(example_copy: Path) -> None:
    out, settings = compiled(example_copy)
    Search(settings)
    assert Search(settings, joining=True).sampler_study.user_attrs[contract.QAS_STUDY_ATTR] == contract.STAGE_SAMPLER
    assert not isinstance(build_report(out), str)
