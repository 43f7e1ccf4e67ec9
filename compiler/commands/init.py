"""`qas init`'s steps: a model path, a spec path, a device and --force in; the starter spec and its empty
calibration folder written (Written), or why not with nothing written (Refused), out.

The model is read as the intake pass reads it (intake.read_checked: no weights, no quark or torch);
the spec's text is starter.starter_text's. Printing is the CLI's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from compiler.back.emit import write_new_file
from compiler.check.intake_facts import read_checked
from compiler.check.samples import sample_files
from compiler.commands.starter import (
    CALIB_FOLDER,
    DEFAULT_MINUTES,
    N_TRIALS,
    PER_CHANNEL_OPSET,
    device_problem,
    full_search_seconds,
    opset_below_per_channel,
    starter_text,
    suggested_search,
)


@dataclass(frozen=True)
class Refused:
    usage: bool  # a usage error (exit 2), else a refused model or file (exit 1)
    lines: tuple[str, ...]  # what to print, error first, then hints


@dataclass(frozen=True)
class Written:
    spec: Path
    calib: Path
    calib_created: bool
    samples_there: int  # sample files already in a calibration folder that existed
    facts: dict[str, Any]
    warnings: tuple[str, ...]
    minutes: int | None  # the time budget written (search.stop.timeout), None: none
    full_search_s: tuple[float, float]  # the whole search's rough estimate without the time budget
    converted: Path | None = None  # the opset-13 copy the spec points at (--convert-opset)
    old_opset: int | None = None  # the model's opset when below 13 (converted or not)


def init_spec(model: Path, spec: Path, device: str, force: bool, display: Callable[[Path], str],
              minutes: int | None = DEFAULT_MINUTES, convert_opset: bool = False) -> Written | Refused:
    """Check everything first, then create the calibration folder (only what is missing) and write the spec; when
    writing fails, the folders made are removed again. `display` names a path for messages (shell-quoted here).
    With convert_opset, a model below opset 13 is converted first (models/<name>_opset13.onnx beside it) and the
    spec points at the copy."""
    def shown(path: Path) -> str:
        return shlex.quote(display(path))

    problem = device_problem(device)
    if problem is not None:
        return Refused(True, (f"qas: error: {problem}",))
    if not model.is_file():
        what = "is a folder, not a model file" if model.is_dir() else "does not exist"
        return Refused(True, (f"qas: error: the model {shown(model)} {what}",))
    spec = Path(os.path.abspath(spec))
    refused = _check_spec_path(spec, model, force, shown)
    if refused is not None:
        return refused
    facts, risks = read_checked(model, repr(display(model)))
    errors = [r for r in risks if r["severity"] == "error"]
    if facts is None or errors:
        return Refused(False, tuple(line for r in errors for line in _risk_lines(r, shown(model))))
    if not facts["inputs"]:
        return Refused(False, (f"qas: error: {shown(model)} declares no inputs (besides its weights): there is "
                               "nothing to calibrate",))
    old_opset = opset_below_per_channel(facts)
    converted_from = None
    if convert_opset and old_opset is not None:
        converted = _convert(model, old_opset, force, display)
        if isinstance(converted, Refused):
            return converted
        converted_from, (model, facts, risks) = model.name, converted
    calib = spec.parent / CALIB_FOLDER
    for folder in (calib.parent, calib):
        if os.path.lexists(folder) and not folder.is_dir():
            return Refused(False, (f"qas: error: {shown(folder)} is in the way: the calibration samples go in the "
                                   f"folder {shown(calib)}",
                                   "  hint: move it away, or write the spec into another folder with --output"))
    text = starter_text(facts, _relative(model, spec.parent), spec.name, device, minutes, converted_from)
    samples_there = len(sample_files(calib, None)) if calib.is_dir() else 0
    created: list[Path] = []
    try:
        for folder in (calib.parent, calib):
            if not folder.is_dir():
                folder.mkdir()
                created.append(folder)
    except OSError as exc:
        _remove(created)
        return Refused(False, (f"qas: error: cannot create {shown(calib)}: {exc.strerror or exc}",))
    problem = write_new_file(spec, text, replace=force)
    if problem is not None:
        _remove(created)
        return Refused(False, (f"qas: error: {problem}",))
    return Written(spec=spec, calib=calib, calib_created=calib in created, samples_there=samples_there, facts=facts,
                   warnings=tuple(line for r in risks for line in _risk_lines(r, shown(model))), minutes=minutes,
                   full_search_s=full_search_seconds(facts, suggested_search(device), N_TRIALS, device),
                   converted=model if converted_from else None, old_opset=old_opset)


def _convert(model: Path, old_opset: int, force: bool,
             display: Callable[[Path], str]) -> tuple[Path, dict[str, Any], list[dict[str, Any]]] | Refused:
    """--convert-opset: the model converted to opset 13 beside it (never over an existing copy without force); the
    copy with its facts and risks out, or why not."""
    def shown(path: Path) -> str:
        return shlex.quote(display(path))

    copy = opset13_path(model)
    if os.path.lexists(copy) and not force:
        return Refused(False, (f"qas: error: {shown(copy)} exists; left as it is",
                               "  hint: pass --force to convert again, or point the spec at it by hand"))
    problem = convert_to_opset13(model, copy)
    if problem is not None:
        return Refused(False, (f"qas: error: onnx's version converter could not convert {shown(model)} from opset "
                               f"{old_opset} to {PER_CHANNEL_OPSET}: {problem}",
                               "  hint: export the model again with opset_version=13 or later"))
    facts, risks = read_checked(copy, repr(display(copy)))
    if facts is None or any(r["severity"] == "error" for r in risks):
        return Refused(False, tuple(line for r in risks for line in _risk_lines(r, shown(copy))))
    return copy, facts, risks


def opset13_path(model: Path) -> Path:
    """models/<name>.onnx in; models/<name>_opset13.onnx (beside it) out."""
    return model.with_name(f"{model.stem}_opset{PER_CHANNEL_OPSET}.onnx")


def convert_to_opset13(model: Path, target: Path) -> str | None:
    """Convert a model to opset 13 with onnx's version converter and save it (external data as <target>_data when
    the model has any), checked with onnx.checker; None, or why it failed (nothing is left at target then)."""
    import onnx
    from onnx import version_converter

    try:
        loaded = onnx.load(str(model))
        external = any(t.HasField("data_location") and t.data_location == onnx.TensorProto.EXTERNAL
                       for t in onnx.load(str(model), load_external_data=False).graph.initializer)
        converted = version_converter.convert_version(loaded, PER_CHANNEL_OPSET)
        onnx.checker.check_model(converted)
        if external:
            onnx.save(converted, str(target), save_as_external_data=True, location=target.name + "_data")
        else:
            onnx.save(converted, str(target))
    except Exception as exc:  # noqa: BLE001 - onnx raises many kinds; each is the reason to print
        for leftover in (target, target.with_name(target.name + "_data")):
            if leftover.exists():
                leftover.unlink()
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def convert_command(model: str) -> str:
    """The one-line command that does what --convert-opset does, for a user who prefers to run it alone."""
    target = PurePath(model).with_name(PurePath(model).stem + "_opset13.onnx").as_posix()
    code = (f"import onnx, onnx.version_converter as v; onnx.save(v.convert_version(onnx.load({json.dumps(model)}), "
            f"13), {json.dumps(target)})")
    return "python -c " + shlex.quote(code)  # one shell word, whatever the path holds


def _check_spec_path(spec: Path, model: Path, force: bool, shown: Callable[[Path], str]) -> Refused | None:
    if spec.is_dir():
        return Refused(True, (f"qas: error: --output {shown(spec)} is a folder; name the spec file, e.g. "
                              f"{shown(spec / 'spec.yaml')}",))
    if not spec.parent.is_dir():
        return Refused(True, (f"qas: error: the folder {shown(spec.parent)} does not exist; create it first",))
    if os.path.lexists(spec) and spec.exists() and os.path.samefile(spec, model):
        return Refused(True, (f"qas: error: --output {shown(spec)} is the model itself",))
    if os.path.lexists(spec) and not force:
        return Refused(False, (f"qas: error: {shown(spec)} exists; left as it is",
                               "  hint: pass --force to replace it, or choose another file with --output"))
    return None


def _risk_lines(risk: dict[str, Any], where: str) -> list[str]:
    lines = [f"{where}: {risk['severity']}[{risk['code']}]: {risk['message']}"]
    return lines + ([f"  hint: {risk['hint']}"] if risk.get("hint") else [])


def _relative(model: Path, folder: Path) -> str:
    """The model's path as the spec writes it: relative to the spec's folder, with forward slashes."""
    absolute = os.path.abspath(model)
    try:
        return PurePath(os.path.relpath(absolute, folder)).as_posix()
    except ValueError:  # another drive (Windows): only an absolute path reaches it
        return PurePath(absolute).as_posix()


def _remove(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()
