"""The `qas` command line (typer): arguments in; diagnostics, files and exit codes out.

Exit codes: 0 ok, 1 spec errors (or --check found differences), 2 usage, 3 internal bug.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import signal
import sys
import traceback
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from compiler import __version__
from compiler.back.cost import duration
from compiler.back.emit import differences, refuse_overwrites, write_atomically
from compiler.back.summary import plan_summary, summary_text
from compiler.check.presets import PRESET_NAMES, preset_config
from compiler.check.spacemath import count_configs, quark_discrete_size, stage1_space
from compiler.check.target_env import Environment, load_target, probe
from compiler.commands.cli_style import CONTEXT_SETTINGS, Command, Group
from compiler.commands.init import Refused, Written, convert_command, init_spec
from compiler.commands.out_dir import resolve_out_dir
from compiler.commands.pipeline import Result, compile_spec
from compiler.commands.run import Outcome, manifest_target, measured_estimate, record, run_search
from compiler.commands.starter import CALIB_LIMIT, DEFAULT_MINUTES, SPEC_FILE, describe_input
from compiler.diagnostics import Diagnostic, has_errors, summary_line, to_items, to_text
from compiler.report import build_report, report_text, write_report_files
from compiler.report.status import JSON_KEYS as STATUS_KEYS
from compiler.report.status import status_text
from compiler.resources import load_schema
from compiler.runtime.contract import ENGINES, MANIFEST_FILE, RUN_LOG_FILE
from compiler.runtime.lock import holder as lock_holder
from compiler.runtime.settings import Settings

EXIT_OK, EXIT_SPEC, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3

app = typer.Typer(
    name="qas",
    help="Compile a YAML search spec into a reviewable AMD Quark quantization-search script.\n\n"
         "Example: qas compile specs/example/spec.yaml && python specs/example/autosearch_output/tinycnn_autosearch.py",
    no_args_is_help=True,
    cls=Group,
    context_settings=CONTEXT_SETTINGS,
    pretty_exceptions_enable=False,
)


class Format(StrEnum):
    text = "text"
    json = "json"


class Stage(StrEnum):
    """A search stage, as `qas export --stage` takes it (contract.STAGE_GRID, STAGE_SAMPLER)."""

    grid = "grid"
    sampler = "sampler"


SpecArg = Annotated[Path, typer.Argument(metavar="SPEC", help="The search spec (YAML).", show_default=False)]
FormatOpt = Annotated[Format, typer.Option("--format", help="Diagnostics and the plan as text or JSON.")]
PythonOpt = Annotated[str | None, typer.Option(
    "--python", help="The interpreter that will run the script; probed for packages and the device. "
                     "Default: the one running qas.", show_default=False)]
TargetEnvOpt = Annotated[Path | None, typer.Option(
    "--target-env", help="A JSON description of the target machine (write it there with `qas env`), "
                         "used instead of probing an interpreter.", show_default=False)]


def _environment(python: str | None, target_env: Path | None) -> Environment:
    """--python / --target-env in, the Environment to check against out; a bad one is a usage error."""
    if python is not None and target_env is not None:
        typer.echo("qas: error: give --python or --target-env, not both", err=True)
        raise typer.Exit(EXIT_USAGE)
    found = load_target(target_env) if target_env is not None else probe(python or sys.executable)
    if isinstance(found, str):
        typer.echo(f"qas: error: {found}", err=True)
        raise typer.Exit(EXIT_USAGE)
    return found


def _report(result: Result, fmt: Format, extra: list[Diagnostic] | None = None) -> list[Diagnostic]:
    """Diagnostics (stderr) and the plan (stdout) as text, or one JSON object on stdout."""
    diagnostics = result.diagnostics + result.locate(extra or [])
    shown = _display_name(result.spec_file)
    summary = plan_summary(result.plan) if result.plan is not None else None
    if fmt is Format.json:
        document = {"file": shown, "ok": not has_errors(diagnostics), "diagnostics": to_items(diagnostics, shown),
                    "plan": summary}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return diagnostics
    if diagnostics:
        sys.stderr.write(to_text(diagnostics, shown))
        sys.stderr.write(summary_line(diagnostics) + "\n")
    if summary is not None and not has_errors(extra or []):  # nothing was written: no plan that reads as if it were
        sys.stdout.write(summary_text(summary))
    return diagnostics


def _command(*words: str | Path) -> str:
    """A command line to print for the user to paste: every word shell-quoted (paths may hold spaces or quotes)."""
    return " ".join(shlex.quote(str(w)) for w in words)


def _display_name(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def shell_exit_code(returncode: int) -> int:
    """A child's return code in; the code qas exits with out: a death by signal N as a shell says it (128 + N),
    not as Python's sys.exit wraps a negative code (-9 -> 247)."""
    return 128 - returncode if returncode < 0 else returncode


def _require_file(spec: Path) -> None:
    if not spec.is_file():
        typer.echo(f"qas: error: no spec file at {spec}", err=True)
        raise typer.Exit(EXIT_USAGE)


def _fail(message: str, fmt: Format) -> NoReturn:
    """An error line on stderr (and with --format json, {"ok": false, "error": ...} on stdout); exit 2."""
    if fmt is Format.json:
        sys.stdout.write(json.dumps({"ok": False, "error": message}, indent=2) + "\n")
    typer.echo(f"qas: error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def _guard(fn):
    """Turn an unexpected exception into exit 3 with a report line, never a bare traceback for users (and,
    under --format json, a JSON error object on stdout, so a pipe into jq still reads one)."""
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as exc:  # this is the bug boundary
            if kwargs.get("fmt") is Format.json:
                error = f"internal error (a bug in qas, please report it): {type(exc).__name__}: {exc}"
                sys.stdout.write(json.dumps({"ok": False, "error": error}, indent=2) + "\n")
            typer.echo("qas: internal error (this is a bug in qas, please report it with the spec):", err=True)
            typer.echo(traceback.format_exc(), err=True)
            raise typer.Exit(EXIT_BUG) from exc
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


@app.command("init", cls=Command)
@_guard
def init_command(
    model: Annotated[Path, typer.Argument(help="The float ONNX model to search quantizations of.", metavar="MODEL",
                                         show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o",
                                         help="The spec file to write; its calibration folder (data/calib) and "
                                              "outputs go beside it.")] = Path(SPEC_FILE),
    device: Annotated[str, typer.Option("--device", help="cpu, cuda:N or rocm:N: the device the search runs on "
                                                         "(on cpu the fine-tuning is kept short).")] = "cpu",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing spec file.")] = False,
    minutes: Annotated[int, typer.Option("--minutes", min=0, max=10080,
                                         help="The starter search's time budget (search.stop.timeout): no trial "
                                              "starts after it; 0 writes none (the whole search).")] = DEFAULT_MINUTES,
    convert_opset: Annotated[bool, typer.Option("--convert-opset", help="A model below opset 13: write "
                                                "<name>_opset13.onnx beside it (onnx's version converter) and point "
                                                "the spec at it; per-channel quantization needs opset 13.")] = False,
) -> None:
    """Write a commented starter spec for MODEL and an empty data/calib folder beside it.

    The spec is spec.yaml in the current folder unless --output; its paths are relative to it.

    A model that is not ONNX, is already quantized or misses its external data is refused.

    An existing spec is replaced only with --force; an existing data/calib is left as it is.

    Then fill data/calib and run `qas run spec.yaml`.

    Examples:

      qas init models/resnet50.onnx

      qas init model.onnx --device cuda:0 -o gpu.yaml

      qas init old.onnx --convert-opset --minutes 10
    """
    outcome = init_spec(model, output, device, force, _display_name, minutes or None, convert_opset)
    if isinstance(outcome, Refused):
        for line in outcome.lines:
            typer.echo(line, err=True)
        raise typer.Exit(EXIT_USAGE if outcome.usage else EXIT_SPEC)
    for line in outcome.warnings:
        typer.echo(line, err=True)
    spec, calib = shlex.quote(_display_name(outcome.spec)), shlex.quote(_display_name(outcome.calib) + "/")
    typer.echo(f"wrote {spec} for {shlex.quote(_display_name(model))} (device {device})", err=True)
    if outcome.converted is not None:
        typer.echo(f"converted it from opset {outcome.old_opset} to 13: "
                   f"{shlex.quote(_display_name(outcome.converted))} (per-channel quantization needs opset 13); "
                   "the spec points at the copy", err=True)
    elif outcome.old_opset is not None:
        typer.echo(f"note: the model is opset {outcome.old_opset}; per-channel quantization (the presets' weight "
                   "scales) needs opset 13, so convert it: `qas init --convert-opset` again with --force, or\n  "
                   + convert_command(_display_name(model)), err=True)
    _init_next_steps(outcome, spec, calib)


def _init_next_steps(outcome: Written, spec: str, calib: str) -> None:
    """After `qas init` wrote the spec: the expected duration against its time budget, the calibration folder's state
    and the next steps (fill it, validate, run), said on stderr."""
    low, high = (duration(s) for s in outcome.full_search_s)
    fits = outcome.minutes and outcome.full_search_s[1] <= outcome.minutes * 60
    if fits:
        typer.echo(f"expected duration: {low} to {high} (rough, with {CALIB_LIMIT} samples), within the "
                   f"{outcome.minutes} min budget written as search.stop.timeout", err=True)
    elif outcome.minutes:
        typer.echo(f"expected duration: at most about {outcome.minutes} min (search.stop.timeout; the trials running "
                   f"then finish); the whole search would take {low} to {high} (rough, with {CALIB_LIMIT} samples)",
                   err=True)
    else:
        typer.echo(f"expected duration: {low} to {high} (rough, with {CALIB_LIMIT} samples; no time budget)", err=True)
    if outcome.calib_created:
        typer.echo(f"created {calib} (empty): the calibration samples go there", err=True)
    else:
        typer.echo(f"{calib} is already there ({outcome.samples_there} sample files): left as it is", err=True)
    inputs = [describe_input(i) for i in outcome.facts["inputs"]]
    if len(inputs) == 1:
        what = f"one .npy file per sample for input {inputs[0]['name']} ({inputs[0]['dtype']}, {inputs[0]['shape']})"
    else:
        what = f"one .npz file per sample with arrays {', '.join(i['name'] for i in inputs)}"
    typer.echo(f"next:\n  1. fill {calib} with up to {CALIB_LIMIT} samples: {what}; the comments in {spec} say more\n"
               f"  2. qas validate {spec}    # checks the samples against the model; plan and rough time\n"
               f"  3. qas run {spec}"
               + (f"\n  4. a larger search: raise n_trials in {spec} and qas run again; it resumes" if fits else
                  f"\n  4. the larger search: delete `stop` in {spec} (or raise its timeout) and qas run again; it "
                  "resumes" if outcome.minutes else ""), err=True)


@app.command("compile", cls=Command)
@_guard
def compile_command(
    spec: SpecArg,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 with a diff if the files on disk "
                                                        "differ.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a hand-edited script or files qas did not "
                                                        "write.")] = False,
    fmt: FormatOpt = Format.text,
    python: PythonOpt = None,
    target_env: TargetEnvOpt = None,
) -> None:
    """Validate SPEC and write <name>_autosearch.py, run_manifest.yaml and quant_plan.json into output.dir.

    Examples:

      qas compile specs/example/spec.yaml

      qas compile --check spec.yaml      # in CI: fail when the committed outputs are stale

      qas compile spec.yaml --target-env gpu-box.json    # compile here for a machine with a GPU
    """
    _require_file(spec)
    result = compile_spec(spec, _environment(python, target_env))
    if not result.ok:
        _report(result, fmt)
        raise typer.Exit(EXIT_SPEC)
    assert result.out_dir is not None
    if check:
        _report(result, fmt)
        diff = differences(result.files, result.out_dir)
        if diff:
            sys.stdout.write(diff)
            # hand-edited or foreign files need --force to be replaced, and a stray runtime file only goes by hand
            force_hint = " --force" if refuse_overwrites(result.files, result.out_dir, False) else ""
            stray = " (and delete the files it lists as only in the runtime folder)" if "only in " in diff else ""
            typer.echo(f"qas: {result.out_dir} is out of date with {spec}; run "
                       f"`{_command('qas', 'compile', spec)}{force_hint}`{stray}", err=True)
            raise typer.Exit(EXIT_SPEC)
        typer.echo(f"qas: {result.out_dir} is up to date", err=True)
        return
    refused = refuse_overwrites(result.files, result.out_dir, force)
    refused += [] if refused else write_atomically(result.files, result.out_dir)
    _report(result, fmt, refused)
    if refused:
        raise typer.Exit(EXIT_SPEC)
    if fmt is Format.text:
        plan = result.plan
        assert plan is not None
        typer.echo(f"wrote {len(result.files)} files to {_display_name(result.out_dir)}: "
                   f"{', '.join(_shown_outputs(result.files))}", err=True)
        typer.echo(f"run it: {_command('python', _display_name(result.out_dir / plan.script))}", err=True)
        _echo_measured(result)


def _echo_measured(result: Result) -> None:
    """With trials already in the output folder's study file (a search to resume): the plan's `measured` line, the
    time left by the study's own median trial. A database study is not opened at compile time."""
    settings = result.plan.settings if result.plan is not None else None
    if settings is None or result.out_dir is None or settings.storage_kind == "url":
        return
    if not (result.out_dir / settings.study_db).is_file() or not (result.out_dir / MANIFEST_FILE).is_file():
        return
    grid, sampler = settings.stage_totals()  # the plan's budget: validate writes no manifest
    measured = measured_estimate(result.out_dir, settings.workers, grid + sampler)
    if measured is not None:
        typer.echo(measured)


def _shown_outputs(files: dict[str, str]) -> list[str]:
    """Output paths in; top-level files by name, and each subfolder once with its file count, out."""
    shown: dict[str, int] = {}
    for name in files:
        folder, _, rest = name.partition("/")
        shown[f"{folder}/" if rest else name] = shown.get(f"{folder}/" if rest else name, 0) + 1
    return [f"{name} ({count} files)" if name.endswith("/") else name for name, count in shown.items()]


@app.command("validate", cls=Command)
@_guard
def validate_command(spec: SpecArg, fmt: FormatOpt = Format.text, python: PythonOpt = None,
                     target_env: TargetEnvOpt = None) -> None:
    """Check SPEC and print its diagnostics and plan (trials, disk, rough time); writes nothing.

    Examples:

      qas validate spec.yaml --format json

      qas validate spec.yaml --python /opt/venvs/quark/bin/python
    """
    _require_file(spec)
    result = compile_spec(spec, _environment(python, target_env))
    _report(result, fmt)
    if not result.ok:
        raise typer.Exit(EXIT_SPEC)
    if fmt is Format.text:
        _echo_measured(result)
        typer.echo(f"{spec}: ok", err=True)


@app.command("run", cls=Command)
@_guard
def run_command(
    target: Annotated[Path, typer.Argument(
        metavar="SPEC_OR_MANIFEST", help="A search spec, the run_manifest.yaml compile wrote, or its folder.",
        show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Run without asking (for CI).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Compile a spec over a hand-edited script or files qas "
                                                         "did not write.")] = False,
    python: PythonOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Quark's, onnxruntime's and torch's "
                                                                  "output too (else it goes to search.log).")] = False,
    workers: Annotated[int | None, typer.Option("--workers", min=1, metavar="N", help=(
        "Worker processes on this machine (default: the spec's search.workers); they share the study and split "
        "the cores, and one progress bar shows the whole study."), show_default=False)] = None,
) -> None:
    """Compile (a spec) or check (a manifest), show the plan, ask, then run the search with a progress bar.

    The outcome (status, exit code, best value, model and config) is appended to run_manifest.yaml;
    the script's output also goes to qas_run.log. Ctrl-C or SIGTERM stops the search, marking the trial in hand
    interrupted; run again to resume.

    Examples:

      qas run specs/example/spec.yaml

      qas run specs/example/autosearch_output --yes      # the folder compile wrote (its run_manifest.yaml)

      qas run specs/example/spec.yaml --workers 2          # two worker processes on this machine
    """
    target, spec = _run_target(target)
    interpreter = python or sys.executable
    result = compile_spec(spec or target, _environment(interpreter, None))
    if not result.ok:
        _report(result, Format.text)
        raise typer.Exit(EXIT_SPEC)
    assert result.out_dir is not None and result.plan is not None
    settings = result.plan.settings
    _refuse_to_start(settings, result.out_dir, workers)
    _write_or_check_outputs(result, target, spec, force)
    if workers is not None:  # the plan shown is this run's: --workers replaces the spec's search.workers
        result.plan = dataclasses.replace(result.plan, settings=dataclasses.replace(settings, workers=workers))
    _report(result, Format.text)
    measured = measured_estimate(result.out_dir, result.plan.settings.workers)
    if measured is not None:  # a resume: the study's own steps say more than the plan's model
        typer.echo(measured)
    if not yes:
        _confirm(_display_name(result.out_dir / result.plan.script), interpreter)
    outcome = run_search(result.out_dir, interpreter, Console(stderr=True), verbose, workers)
    _report_run(result.out_dir, outcome, interpreter)
    raise typer.Exit(shell_exit_code(outcome.exit_code))


def _write_or_check_outputs(result: Result, target: Path, spec: Path | None, force: bool) -> None:
    """A compiled run target in; raises typer.Exit unless its outputs are the compiled ones: a manifest's folder must
    match its spec, a spec's outputs are written (refused over files qas did not write, unless forced)."""
    assert result.out_dir is not None
    if spec is not None:
        _require_up_to_date(result, target, spec)
        return
    refused = refuse_overwrites(result.files, result.out_dir, force)
    refused += [] if refused else write_atomically(result.files, result.out_dir)
    if refused:
        _report(result, Format.text, refused)
        raise typer.Exit(EXIT_SPEC)


def _confirm(script: str, interpreter: str) -> None:
    """Asks whether to run the script; raises typer.Exit(EXIT_SPEC) on anything but a yes (a closed stdin too)."""
    try:
        go = typer.confirm(f"run {script} with {interpreter}?", default=False, err=True)
    except typer.Abort:  # no answer (stdin closed): not a yes
        go = False
    if not go:
        typer.echo("qas: not run (pass --yes to run without asking)", err=True)
        raise typer.Exit(EXIT_SPEC)


def _run_target(target: Path) -> tuple[Path, Path | None]:
    """What `qas run` was given (a spec, a run_manifest.yaml or its folder) in; the file to compile or check and the
    spec a manifest names (None for a spec) out; a usage error exits."""
    if target.is_dir():  # an output folder: run what was compiled into it
        if not (target / MANIFEST_FILE).is_file():
            typer.echo(f"qas: error: no {MANIFEST_FILE} in {target}\n"
                       f"  hint: give the spec (qas run SPEC), or compile it into that folder first", err=True)
            raise typer.Exit(EXIT_USAGE)
        target = target / MANIFEST_FILE
    _require_file(target)
    spec = manifest_target(target)
    if isinstance(spec, str):
        typer.echo(f"qas: error: {spec}", err=True)
        raise typer.Exit(EXIT_USAGE)
    if spec is not None and not spec.is_file():
        typer.echo(f"qas: error: {target} was compiled from {_display_name(spec)}, which is not there\n"
                   f"  hint: run the spec itself: qas run SPEC", err=True)
        raise typer.Exit(EXIT_USAGE)
    return target, spec


def _refuse_to_start(settings: Settings, out_dir: Path, workers: int | None) -> None:
    """Exit with a usage error before anything is written or recorded when --workers asks more than the engine runs
    or another search holds the study (that run's files are its own)."""
    if workers is not None and workers > 1 and not ENGINES[settings.engine].supports("workers"):
        typer.echo(f"qas: error: engine {settings.engine} runs one process (Quark's n_jobs above 1 crashes)\n"
                   f"  hint: drop --workers, or use engine qas (search.engine: qas) for several workers", err=True)
        raise typer.Exit(EXIT_USAGE)
    running = lock_holder(out_dir / settings.study_db)
    if running is not None:
        typer.echo(f"qas: error: another search is running on {settings.study_db}: {running}; wait for it to "
                   f"end or stop it", err=True)
        raise typer.Exit(EXIT_USAGE)


def _report_run(out_dir: Path, outcome: Outcome, interpreter: str) -> None:
    """A finished run in; its report printed and written, its outcome recorded in run_manifest.yaml, one closing
    line out (a step that fails is a warning: the search's own files stand)."""
    report = build_report(out_dir)
    problem = record(out_dir, outcome, interpreter, report)
    if problem is not None:
        typer.echo(f"qas: warning: the outcome was not recorded in {MANIFEST_FILE}: {problem}", err=True)
    if isinstance(report, dict):
        sys.stdout.write(report_text(report | {"run_status": outcome.status}))
        written = write_report_files(report, out_dir)
        if isinstance(written, str):
            typer.echo(f"qas: warning: the report files were not written: {written}", err=True)
        else:
            typer.echo(f"wrote {', '.join(_display_name(out_dir / f) for f in written)}", err=True)
    how = (f"killed by {signal.Signals(-outcome.exit_code).name}, exit code {outcome.exit_code}"
           if outcome.exit_code < 0 else f"exit code {outcome.exit_code}")
    typer.echo(f"qas: run {outcome.status} ({how}); recorded in "
               f"{_display_name(out_dir / MANIFEST_FILE)}; log {_display_name(out_dir / RUN_LOG_FILE)}", err=True)


def _require_up_to_date(result: Result, manifest: Path, spec: Path) -> None:
    """A manifest is run only while compiling its spec here would write exactly the files on disk."""
    assert result.out_dir is not None
    if result.out_dir.resolve() != manifest.parent.resolve():
        typer.echo(f"qas: error: {spec} writes to {_display_name(result.out_dir)}, not to the folder of {manifest}",
                   err=True)
        raise typer.Exit(EXIT_SPEC)
    diff = differences(result.files, result.out_dir)
    if diff:
        sys.stdout.write(diff)
        typer.echo(f"qas: error: {_display_name(result.out_dir)} is out of date with {_display_name(spec)} "
                   f"(or was compiled for another interpreter)\n  hint: run "
                   f"`{_command('qas', 'compile', _display_name(spec))}`, "
                   f"or `{_command('qas', 'run', _display_name(spec))}`",
                   err=True)
        raise typer.Exit(EXIT_SPEC)


@app.command("sensitivity", cls=Command)
@_guard
def sensitivity_command(
    spec: SpecArg,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a hand-edited script or files qas did not "
                                                        "write.")] = False,
    python: PythonOpt = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Groups to print, most sensitive first.")] = 10,
) -> None:
    """Compile SPEC, then rank its nodes and blocks by how much quantizing them hurts (engine qas).

    One quantization with the base configuration, then one inference pass per candidate with its Q/DQ bypassed:
    the output error that goes away is its sensitivity. The ranking goes to sensitivity.json in the output
    folder (with sensitivity.html / .png when plotly / matplotlib are there) and is reused while the model, base
    configuration, data and method stay the same.

    Examples:

      qas sensitivity spec.yaml

      qas sensitivity spec.yaml --top 20 --python /opt/venvs/quark/bin/python
    """
    import subprocess

    from compiler.runtime.contract import ENGINES, SENSITIVITY_FILE
    from compiler.runtime.sensitivity import ranking_lines

    _require_file(spec)
    interpreter = python or sys.executable
    result = compile_spec(spec, _environment(interpreter, None))
    if not result.ok:
        _report(result, Format.text)
        raise typer.Exit(EXIT_SPEC)
    assert result.out_dir is not None and result.plan is not None
    if not ENGINES[result.plan.settings.engine].supports("sensitivity"):
        typer.echo(f"qas: error: engine {result.plan.settings.engine} has no sensitivity analysis\n"
                   "  hint: remove search.engine (engine qas runs it)", err=True)
        raise typer.Exit(EXIT_SPEC)
    refused = refuse_overwrites(result.files, result.out_dir, force)
    refused += [] if refused else write_atomically(result.files, result.out_dir)
    _report(result, Format.text, refused)
    if refused:
        raise typer.Exit(EXIT_SPEC)
    ran = subprocess.run([interpreter, str(result.out_dir / result.plan.script), "--sensitivity"],
                         cwd=result.out_dir)
    if ran.returncode != 0:
        raise typer.Exit(shell_exit_code(ran.returncode))
    data = json.loads((result.out_dir / SENSITIVITY_FILE).read_text(encoding="utf-8"))
    *ranking, cost = [line for line in ranking_lines(data, top) if not line.startswith("note: ")]
    typer.echo("sensitivity: " + ranking[0])
    for line in ranking[1:]:
        typer.echo(line)
    for line in data.get("notes", []):
        typer.echo(f"note: {line}")
    typer.echo(f"{cost}; {_display_name(result.out_dir / SENSITIVITY_FILE)}", err=True)


@app.command("report", cls=Command)
@_guard
def report_command(
    out_dir: Annotated[Path, typer.Argument(
        metavar="OUT", help="A search's output folder, its run_manifest.yaml, or the spec (as qas run takes).",
        show_default=False)],
    fmt: Annotated[Format, typer.Option("--format", help="The report as text or JSON.")] = Format.text,
) -> None:
    """Summarize a search (trials, failures, best config and model, top 5, importances); write report.md.

    report.md goes into the output folder with Optuna's HTML plots and a PNG of the history. Reads the study; never
    changes it.

    Examples:

      qas report specs/example/spec.yaml

      qas report out/ --format json | jq .best
    """
    found = resolve_out_dir(out_dir)
    if isinstance(found, str):
        _fail(found, fmt)
    out_dir = found
    report = build_report(out_dir)
    if isinstance(report, str):
        _fail(report, fmt)
    written = write_report_files(report, out_dir)
    if isinstance(written, str):
        _fail(written, fmt)
    if fmt is Format.json:
        sys.stdout.write(json.dumps({"ok": True, **report, "files": written}, indent=2) + "\n")
        return
    sys.stdout.write(report_text(report))
    typer.echo(f"wrote {', '.join(_display_name(out_dir / f) for f in written)}", err=True)


@app.command("export", cls=Command)
@_guard
def export_command(
    out_dir: Annotated[Path, typer.Argument(
        metavar="OUT", help="A search's output folder, its run_manifest.yaml, or the spec (as qas run takes).",
        show_default=False)],
    trial: Annotated[int | None, typer.Option("--trial", min=0, metavar="N", help="The trial to rebuild (its number "
                                                                                  "in `qas report`).")] = None,
    stage: Annotated[Stage | None, typer.Option("--stage", help="The trial's stage (default: sampler, or grid when "
                                                                 "the search runs only a grid).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="PATH", help="Where the model goes "
                                                "(default: exported_<stage>_<N>.onnx in the output folder).")] = None,
    pareto: Annotated[bool, typer.Option("--pareto", help="Rebuild every member of the Pareto front "
                                                          "(search.objectives).")] = False,
    python: PythonOpt = None,
) -> None:
    """Rebuild a recorded trial's model from its recorded configuration and check it scores what the study recorded.

    Reads only the study (the search may still be running) and quantizes again with Quark, reusing the calibration
    cache; works when the trial's model file is gone. Exits 0 when every model scores exactly the recorded
    value; 1 when one differs (it says by how much and why; the model is written either way).

    Examples:

      qas export out/ --trial 7

      qas export spec.yaml --trial 2 --stage grid -o int8.onnx

      qas export out/ --pareto
    """
    import subprocess

    if (trial is None) == (not pareto):
        typer.echo("qas: error: give --trial N or --pareto\n  hint: qas export OUT --trial N", err=True)
        raise typer.Exit(EXIT_USAGE)
    if pareto and (stage is not None or output is not None):
        typer.echo("qas: error: --pareto writes exported_sampler_<N>.onnx for each member of the front\n"
                   "  hint: drop --stage and -o", err=True)
        raise typer.Exit(EXIT_USAGE)
    found, manifest = _exportable(out_dir)
    argv = [python or sys.executable, manifest["outputs"]["script"]]
    argv += ["--export-pareto"] if pareto else ["--export", str(trial)]
    argv += ["--export-stage", stage.value] if stage is not None else []
    argv += ["--export-to", str(output.resolve())] if output is not None else []
    ran = subprocess.run(argv, cwd=found)
    raise typer.Exit(shell_exit_code(ran.returncode))


def _exportable(out_dir: Path) -> tuple[Path, dict[str, Any]]:
    """What `qas export` was given in; the output folder and its manifest out, or typer.Exit(EXIT_USAGE) with the
    error when there is none, or its engine or runtime cannot export."""
    from compiler.report.manifest import load_manifest

    found = resolve_out_dir(out_dir)
    if isinstance(found, str):
        typer.echo(f"qas: error: {found}", err=True)
        raise typer.Exit(EXIT_USAGE)
    manifest = load_manifest(found / MANIFEST_FILE)
    if isinstance(manifest, str):
        typer.echo(f"qas: error: {manifest}", err=True)
        raise typer.Exit(EXIT_USAGE)
    engine = ENGINES.get(manifest["engine"])
    if engine is None or not engine.supports("export"):
        why = engine.why_not("export") if engine is not None else "unknown engine"
        typer.echo(f"qas: error: engine {manifest['engine']} cannot export a trial: {why}", err=True)
        raise typer.Exit(EXIT_USAGE)
    if not (found / manifest["outputs"]["runtime"] / "export.py").is_file():  # compiled by a qas without export
        typer.echo(f"qas: error: {_display_name(found)} was compiled by an older qas, whose runtime cannot export\n"
                   f"  hint: compile its spec again (qas compile SPEC); the study and its trials stay", err=True)
        raise typer.Exit(EXIT_USAGE)
    return found, manifest


@app.command("dashboard", cls=Command)
@_guard
def dashboard_command(
    target: Annotated[Path, typer.Argument(
        metavar="OUT", help="A search's output folder, its run_manifest.yaml, or the spec (as qas run takes).",
        show_default=False)],
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="The port to listen on.")] = 8080,
    host: Annotated[str, typer.Option("--host", help="The address to listen on; one other than this machine's "
                                                     "loopback needs --allow-remote.")] = "127.0.0.1",
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Listen on a --host other machines reach "
                                                                       "(the dashboard has no login).")] = False,
) -> None:
    """Serve the search's study (grid and sampler stage) read-only in optuna-dashboard, Optuna's web UI.

    Reads the journal file, or the PostgreSQL database in the variable storage.url_env names; never creates or
    changes a study. Trials show their config, what they kept in float and their steps as user attributes. It
    listens on 127.0.0.1 only: from another machine, tunnel to it (ssh -L 8080:127.0.0.1:8080 HOST) and open
    http://127.0.0.1:8080 there. Ctrl-C stops it.

    Needs optuna-dashboard (pip install 'qas-compiler[dashboard]').

    Examples:

      qas dashboard specs/example/spec.yaml

      qas dashboard out/ --port 8081
    """
    from compiler.commands.dashboard import host_problem, open_study, remote_warning, require_dashboard, serve

    refused = host_problem(host, allow_remote)
    if refused is not None:
        _fail(refused, Format.text)
    missing = require_dashboard()
    if missing is not None:
        _fail(missing, Format.text)
    out_dir = resolve_out_dir(target)
    if isinstance(out_dir, str):
        _fail(out_dir, Format.text)
    opened = open_study(out_dir)
    if isinstance(opened, str):
        _fail(opened, Format.text)
    storage, facts = opened
    warning = remote_warning(host)
    if warning is not None:
        typer.echo(warning, err=True)
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"qas: serving {', '.join(facts['studies'])} from {facts['where']} read-only "
               f"(objectives: {', '.join(facts['objectives'])}) at http://{shown}:{port}/dashboard; Ctrl-C stops",
               err=True)
    try:
        serve(storage, host, port)
    except OSError as exc:  # the port is taken, or the address is not this machine's
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}\n  hint: pick another --port", Format.text)
    except KeyboardInterrupt:
        pass


@app.command("status", cls=Command)
@_guard
def status_command(
    out_dir: Annotated[Path, typer.Argument(
        metavar="OUT", help="A search's output folder, its run_manifest.yaml, or the spec (as qas run takes).",
        show_default=False)],
    fmt: Annotated[Format, typer.Option("--format", help="The status as text or JSON.")] = Format.text,
) -> None:
    """Where a search stands, while it runs: the budget, each worker's trials and what it runs now, failures,
    retried trials and the best so far. Reads the study (the journal file, or the database in the variable
    storage.url_env names); writes nothing.

    Examples:

      qas status specs/example/autosearch_output

      QAS_STORAGE_URL=postgresql+psycopg://... qas status out/ --format json | jq .workers
    """
    found = resolve_out_dir(out_dir)
    if isinstance(found, str):
        _fail(found, fmt)
    report = build_report(found)
    if isinstance(report, str):
        _fail(report, fmt)
    if fmt is Format.json:
        sys.stdout.write(json.dumps({"ok": True, **{k: report[k] for k in STATUS_KEYS}}, indent=2) + "\n")
        return
    sys.stdout.write(status_text(report))


def _preset_names(incomplete: str) -> list[str]:
    """Shell completion of `qas presets NAME`: the preset names that start with what was typed."""
    return [name for name in PRESET_NAMES if name.startswith(incomplete)]


@app.command("presets", cls=Command)
@_guard
def presets_command(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="A preset to show in full.",
                                                  autocompletion=_preset_names, show_default=False)] = None,
) -> None:
    """List Quark's AutoSearch presets with their sizes, or show one resolved.

    Examples:

      qas presets

      qas presets XINT8_SEARCH
    """
    if name is None:
        typer.echo(f"{'preset':<16} {'quark size':>10} {'grid stage':>10} {'two-stage':>9}")
        for preset in PRESET_NAMES:
            cfg = preset_config(preset)
            space = cfg["search_space"]
            typer.echo(f"{preset:<16} {quark_discrete_size(space):>10} {count_configs(stage1_space(space)):>10} "
                       f"{str(cfg['two_stage_search']).lower():>9}")
        return
    if name not in PRESET_NAMES:
        typer.echo(f"qas: error: unknown preset {name!r}; known: {', '.join(PRESET_NAMES)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    cfg = preset_config(name)
    space = cfg["search_space"]
    shown = {"preset": name, "quark_discrete_size": quark_discrete_size(space),
             "grid_stage_configs": count_configs(stage1_space(space)), **cfg}
    typer.echo(json.dumps(shown, indent=2))


@app.command("env", cls=Command)
@_guard
def env_command(python: PythonOpt = None) -> None:
    """Print what an interpreter has (packages, onnxruntime providers, torch build) as a --target-env file.

    Example, on the GPU box, then on your laptop:

      qas env --python /opt/venvs/quark/bin/python > gpu-box.json

      qas compile spec.yaml --target-env gpu-box.json
    """
    found = _environment(python, None)
    typer.echo(json.dumps(found.document, indent=2, sort_keys=True))


@app.command("schema", cls=Command)
@_guard
def schema_command() -> None:
    """Print the spec's JSON Schema (Draft 2020-12), for editors and CI.

    Example:

      qas schema > spec.schema.json
    """
    typer.echo(json.dumps(load_schema("spec.schema.json"), indent=2))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"qas {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version.")] = False,
) -> None:
    """qas: declarative quantization search for ONNX models with AMD Quark."""


def run() -> None:
    """Console entry point: click's usage errors exit 2 already; everything else goes through _guard.

    Named `qas` also under `python -m compiler`, so help, messages and shell completion say what users type."""
    app(prog_name="qas")
