"""`qas run`'s engine room: a compiled output dir and an interpreter in; the search run as a child process
with a live progress bar from the study, its output tee'd to qas_run.log, and its outcome appended to
run_manifest.yaml (after emit.RUN_MARKER) out. The search stops cleanly if qas itself is killed (PARENT_PID_ENV).

The recorded invocation is run as written, with only its "python" replaced by the chosen interpreter;
the lines compile wrote are never changed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from compiler.back.emit import RUN_MARKER, split_run_block, write_atomically
from compiler.back.render import yaml_scalar
from compiler.runtime.contract import (
    ATTR_INTERRUPTED,
    ENGINES,
    EXIT_INTERRUPTED,
    GRID_STUDY_SUFFIX,
    MANIFEST_FILE,
    PARENT_PID_ENV,
    RUN_LOG_FILE,
    stage_totals,
)

POLL_SECONDS = 1.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_SECONDS = 120.0  # after Ctrl-C: how long the child gets to finish the trial in hand and close the study


@dataclass(frozen=True)
class Snapshot:
    """How far the search is, read from its study."""

    done: int  # complete trials, both stages, and pruned ones (search.prune: they count toward the budget)
    failed: int  # FAIL trials that were not Ctrl-C
    best: float | None


@dataclass(frozen=True)
class Outcome:
    status: str  # "completed" | "interrupted" | "failed" | "stopped: tolerance" | "stopped: timeout" (search.stop)
    exit_code: int
    started: str
    finished: str


def manifest_target(path: Path) -> Path | str | None:
    """A `qas run` argument in; the spec a qas run_manifest.yaml was compiled from out, None when the path is
    not a qas manifest (so: a spec), or an error line."""
    from ruamel.yaml import YAML, YAMLError

    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError):
        return None  # not readable as YAML: the compiler will say what is wrong with it as a spec
    if not isinstance(data, dict) or data.get("generated_by") != "qas":
        return None
    spec = data.get("inputs", {}).get("spec") if isinstance(data.get("inputs"), dict) else None
    if not isinstance(spec, str) or not spec:
        return f"{path} names no inputs.spec; recompile it with `qas compile SPEC`"
    return Path(os.path.normpath(path.parent / spec))  # a/out/../spec.yaml is shown as a/spec.yaml


def total_trials(manifest: dict[str, Any]) -> int:
    """The trials a full run records in its study: the sampler budget, plus the grid stage's configurations unless
    the sampler is Grid (then the budget already counts them) or Quark's own loop runs the grid stage (it keeps
    those out of the study)."""
    budget = manifest["budget"]
    engine = ENGINES.get(manifest.get("engine", ""))
    search = manifest["search"]
    grid, sampled = stage_totals(search.get("sampler", ""), bool(search.get("two_stage")), budget["effective_trials"],
                                 budget["grid_configs"])
    # Quark's own loop runs a two-stage search's grid stage outside the study (F11); Grid's configurations are in it
    outside = engine is not None and engine.quark_loop and search.get("sampler") != "Grid"
    return sampled + (0 if outside else grid)


def snapshot(out_dir: Path, manifest: dict[str, Any]) -> Snapshot | None:
    """The study now, read-only; None while it does not exist yet or is busy."""
    from optuna.trial import TrialState

    from compiler.report import load_studies

    facts = manifest["outputs"]["study"]
    loaded = load_studies(out_dir / facts["db"], facts["name"], facts["name"] + GRID_STUDY_SUFFIX, facts.get("url_env"))
    if isinstance(loaded, str):
        return None
    trials = [t for _, study_trials in loaded for t in study_trials]
    values = [t.values[0] for t in trials if t.state == TrialState.COMPLETE]
    best = (max if manifest["search"]["direction"] == "maximize" else min)(values) if values else None
    failed = sum(1 for t in trials if t.state == TrialState.FAIL and not t.user_attrs.get(ATTR_INTERRUPTED))
    pruned = sum(1 for t in trials if t.state == TrialState.PRUNED)
    return Snapshot(done=len(values) + pruned, failed=failed, best=best)


def measured_estimate(out_dir: Path, workers: int, total: int | None = None) -> str | None:
    """A search with trials already recorded (a resume, or a study other workers are running) in; the time left by
    the measured median trial (its recorded steps) out, as the plan's line; None for a new search. `total`: the
    trials the plan about to run counts (grid and sampler; default: the manifest on disk's)."""
    from compiler.back.cost import duration
    from compiler.report import build_report

    report = build_report(out_dir)
    if isinstance(report, str) or not report.get("cost"):
        return None
    cost, trials, budget = report["cost"], report["trials"], report["budget"]
    done = trials["complete_sampler"] + trials["pruned"] + trials["complete_grid"]
    total = budget["effective_trials"] + budget["grid_configs"] if total is None else total
    left = max(total - done, 0)
    if left == 0:
        return None
    seconds = left * cost["trial_median_s"] / max(workers, 1)
    return (f"  measured    {cost['quantizations']} trial(s) quantized so far, median {cost['trial_median_s']:.3g} s "
            f"a trial ({cost['calibrations']} calibrated); about {duration(seconds)} for the {left} left")


def read_compiled_manifest(out_dir: Path) -> tuple[dict[str, Any], str]:
    """The manifest compile wrote (the run block left out), parsed and as text; the caller has just compiled
    or checked it."""
    from ruamel.yaml import YAML

    body = split_run_block((out_dir / MANIFEST_FILE).read_text(encoding="utf-8"))[0]
    return YAML(typ="safe").load(body), body


def command(manifest: dict[str, Any], python: str) -> list[str]:
    """The recorded invocation with its interpreter made explicit."""
    argv = list(manifest["invocation"]["argv"])
    return [python if argv[0] == "python" else argv[0], *argv[1:]]


def run_search(out_dir: Path, python: str, console: Any, verbose: bool = False, workers: int | None = None) -> Outcome:
    """Run the compiled search in out_dir, streaming its output above a progress bar on `console`.

    SIGINT and SIGTERM to qas (also when qas started with SIGINT ignored) stop the search cleanly: the
    child is asked to stop after marking the trial in hand interrupted, and the outcome is "interrupted".
    """
    _stop_requested.clear()
    previous = {signum: signal.signal(signum, _interrupt) for signum in STOP_SIGNALS}
    try:
        return _run(out_dir, python, console, verbose, workers)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_stop_requested = threading.Event()


def _interrupt(signum: int, _frame: Any) -> None:
    # A flag the follow loop polls, not an exception: Python drops an exception raised while it runs a
    # weakref or garbage-collection callback, and the stop would be lost.
    _stop_requested.set()


def _run(out_dir: Path, python: str, console: Any, verbose: bool, workers: int | None) -> Outcome:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    manifest, _ = read_compiled_manifest(out_dir)
    argv = command(manifest, python) + (["--verbose"] if verbose else []) + (
        ["--workers", str(workers)] if workers is not None else [])
    total = total_trials(manifest)
    started = _now()
    with open(out_dir / RUN_LOG_FILE, "a", encoding="utf-8") as log:
        log.write(f"== qas run {started}: {' '.join(argv)}\n")
        log.flush()
        child = subprocess.Popen(argv, cwd=out_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, errors="replace", bufsize=1,
                                 env=os.environ | {"PYTHONUNBUFFERED": "1", PARENT_PID_ENV: str(os.getpid())},
                                 process_group=0)  # Ctrl-C reaches qas only; qas passes it on exactly once
        columns = (TextColumn("search"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[state]}"),
                   TimeRemainingColumn())
        with Progress(*columns, console=console, transient=False) as progress:
            pump = threading.Thread(target=_pump, args=(child.stdout, log, progress.console), daemon=True)
            pump.start()
            first = snapshot(out_dir, manifest) or Snapshot(0, 0, None)
            task = progress.add_task("search", total=total, completed=min(first.done, total), state=_state(first))
            try:
                _follow(child, out_dir, manifest, progress, task, first)
                interrupted = False
            except KeyboardInterrupt:
                interrupted = True
                _stop(child)
            pump.join()
            child.stdout.close()
            last = snapshot(out_dir, manifest)
            if last is not None:
                progress.update(task, completed=min(last.done, total), state=_state(last))
    code = child.returncode
    status = "completed" if code == 0 else "interrupted" if interrupted or code == EXIT_INTERRUPTED else "failed"
    if status == "interrupted":  # a stop that was asked for, also when the child had to be killed after STOP_SECONDS
        code = EXIT_INTERRUPTED
    return Outcome(status=status, exit_code=code, started=started, finished=_now())


def _follow(child: subprocess.Popen, out_dir: Path, manifest: dict[str, Any], progress: Any, task: Any,
            seen: Snapshot) -> None:
    """Poll the study until the child exits; off a terminal, print a line whenever the figures change."""
    total = total_trials(manifest)
    while child.poll() is None:
        if _stop_requested.wait(POLL_SECONDS):
            raise KeyboardInterrupt  # run_search's caller stops the child and records "interrupted"
        now = snapshot(out_dir, manifest)
        if now is None or now == seen:
            continue
        progress.update(task, completed=min(now.done, total), state=_state(now))
        if not progress.console.is_terminal:
            progress.console.print(f"qas run: {now.done}/{total} trials, {_state(now)}", markup=False,
                                   highlight=False)
        seen = now


def _stop(child: subprocess.Popen) -> None:
    """Ctrl-C or SIGTERM: pass it on as SIGINT, and let the child mark the trial in hand and close the study."""
    for signum in STOP_SIGNALS:  # a second signal must not orphan the child
        signal.signal(signum, signal.SIG_IGN)
    try:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.terminate()  # the child's second signal: it ends at once
            child.wait()
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, _interrupt)


def _pump(stream: TextIO, log: TextIO, console: Any) -> None:
    """The child's output in; each line into the log and onto the console above the bar."""
    for line in stream:
        log.write(line)
        log.flush()
        console.print(line.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)


def _state(s: Snapshot) -> str:
    best = "none yet" if s.best is None else f"{s.best:.6g}"
    return f"failed {s.failed}, best {best}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def record(out_dir: Path, outcome: Outcome, python: str, report: dict[str, Any] | str) -> str | None:
    """Append (or replace) the run block of run_manifest.yaml; None on success, else why it was not written."""
    manifest, body = read_compiled_manifest(out_dir)
    best = report.get("best") if isinstance(report, dict) else None
    trials = report["trials"] if isinstance(report, dict) else None
    best_config = manifest["outputs"]["best_config"]
    outputs = {
        "trials_complete": trials["complete_sampler"] + trials["complete_grid"] if trials else None,
        "trials_failed": trials["failed"] if trials else None,
        "budget_reached": report["budget_reached"] if isinstance(report, dict) else None,
        "best_value": best["value"] if best else None,
        "best_config": best_config if best and (out_dir / best_config).is_file() else None,
        "best_model": best["best_model"] if best and best.get("best_model_exists") else None,
    }
    stopped = report.get("stopped") if isinstance(report, dict) else None
    if stopped and outcome.status == "completed":  # a stop rule ended the search: exit 0, said so
        outcome = replace(outcome, status=f"stopped: {stopped['reason']}")
    lines = [RUN_MARKER.rstrip("\n"), "run:"]
    for key, value in (("status", outcome.status), ("exit_code", outcome.exit_code), ("started", outcome.started),
                       ("finished", outcome.finished), ("python", python), ("argv", command(manifest, python)),
                       ("log", RUN_LOG_FILE)):
        lines.append(f"  {key}: {yaml_scalar(value)}")
    lines.append("  outputs:")
    lines += [f"    {key}: {yaml_scalar(value)}" for key, value in outputs.items()]
    problems = write_atomically({MANIFEST_FILE: body + "\n".join(lines) + "\n"}, out_dir)
    return problems[0].message if problems else None
