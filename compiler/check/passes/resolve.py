"""Resolve pass: Spec in; QAS30x diagnostics out for presets, overrides and paths (QAS803: an output folder
that cannot be written, as compile would find it).

The resolution itself (merged space, spec-relative paths) is `compiler.check.resolved`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.check.paths import folder_hint, folder_problem
from compiler.check.resolved import spec_path
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import ReaderSpec, Spec
from compiler.runtime.contract import RUNTIME_PACKAGE


def check(spec: Spec) -> Iterator[Diagnostic]:
    if spec.search.override is not None and spec.search.preset is None:
        yield diag("QAS303", "override only applies to a preset", (*spec.search.path, "override"),
                   hint="merge the change into search.space directly", at_key=True)
    yield from _check_file(spec, spec.model, ("model",), "model", want_dir=False)
    yield from _check_reader(spec, spec.calibration)
    if spec.evaluation.data is not None:
        yield from _check_reader(spec, spec.evaluation.data)
    if spec.evaluation.evaluator is not None:
        file, _ = spec.evaluation.evaluator.rsplit(":", 1)
        yield from _check_file(spec, file, (*spec.evaluation.path, "evaluator"), "evaluator file", want_dir=False)
    yield from _check_output(spec)


def _check_reader(spec: Spec, reader: ReaderSpec) -> Iterator[Diagnostic]:
    if reader.folder is not None:
        yield from _check_file(spec, reader.folder, (*reader.path, "folder"), "sample folder", want_dir=True)
    if reader.images is not None:
        yield from _check_file(spec, reader.images, (*reader.path, "images"), "image folder", want_dir=True)
    if reader.reader is not None:
        file, _ = reader.reader.rsplit(":", 1)
        yield from _check_file(spec, file, (*reader.path, "reader"), "reader file", want_dir=False)


def _check_file(spec: Spec, relative: str, path: tuple, what: str, want_dir: bool) -> Iterator[Diagnostic]:
    target = spec_path(spec, relative)
    try:
        found = target.is_dir() if want_dir else target.is_file()
        state = None if found else ("is not a " + ("folder" if want_dir else "file") if target.exists()
                                    else "does not exist")
    except OSError as exc:  # e.g. a name too long for the file system
        state = f"cannot be used: {exc.strerror or exc}"
    if state is not None:
        yield diag("QAS301", f"{what} {relative!r} {state}", path,
                   hint="paths are relative to the spec file, not the current directory")


def _check_output(spec: Spec) -> Iterator[Diagnostic]:
    root = spec.workspace.resolve()
    for key, value in (("dir", spec.output.dir), ("temp_dir", spec.output.temp_dir)):
        if value is None:
            continue
        at = (*spec.output.path, key)
        folder = spec_path(spec, value)
        if not spec.output.allow_outside_workspace:
            try:
                target = folder.resolve()
            except OSError:
                target = None  # folder_problem says why
            if target is not None and target != root and root not in target.parents:
                yield diag("QAS302", f"output.{key} {value!r} leaves the spec's folder", at,
                           hint="keep outputs beside the spec, or set output.allow_outside_workspace: true")
                continue
            if target == root:
                yield diag("QAS302", f"output.{key} must be a sub-folder, not the spec's own folder", at,
                           hint="for example autosearch_output")
                continue
        problem = folder_problem(folder, (RUNTIME_PACKAGE,) if key == "dir" else (), spec.workspace)
        if problem is not None:
            yield diag("QAS803", f"output.{key} cannot be written: {problem}", at,
                       hint=folder_hint(key))
