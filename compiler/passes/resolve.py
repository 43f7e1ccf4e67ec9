"""Resolve pass: Spec in; QAS30x diagnostics out for presets, overrides and paths.

The resolution itself (merged space, spec-relative paths) is `compiler.resolved`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..diagnostics import Diagnostic, diag
from ..model import ReaderSpec, Spec
from ..resolved import spec_path


def check(spec: Spec) -> Iterator[Diagnostic]:
    if spec.search.override is not None and spec.search.preset is None:
        yield diag("QAS303", "override only applies to a preset", spec.search.path + ("override",),
                   hint="merge the change into search.space directly", at_key=True)
    yield from _check_file(spec, spec.model, ("model",), "model", want_dir=False)
    yield from _check_reader(spec, spec.calibration)
    if spec.evaluation.data is not None:
        yield from _check_reader(spec, spec.evaluation.data)
    if spec.evaluation.evaluator is not None:
        file, _ = spec.evaluation.evaluator.rsplit(":", 1)
        yield from _check_file(spec, file, spec.evaluation.path + ("evaluator",), "evaluator file", want_dir=False)
    yield from _check_output(spec)


def _check_reader(spec: Spec, reader: ReaderSpec) -> Iterator[Diagnostic]:
    if reader.folder is not None:
        yield from _check_file(spec, reader.folder, reader.path + ("folder",), "sample folder", want_dir=True)
    if reader.images is not None:
        yield from _check_file(spec, reader.images, reader.path + ("images",), "image folder", want_dir=True)
    if reader.reader is not None:
        file, _ = reader.reader.rsplit(":", 1)
        yield from _check_file(spec, file, reader.path + ("reader",), "reader file", want_dir=False)


def _check_file(spec: Spec, relative: str, path: tuple, what: str, want_dir: bool) -> Iterator[Diagnostic]:
    target = spec_path(spec, relative)
    if want_dir and not target.is_dir():
        state = "is not a folder" if target.exists() else "does not exist"
        yield diag("QAS301", f"{what} {relative!r} {state}", path,
                   hint="paths are relative to the spec file, not the current directory")
    elif not want_dir and not target.is_file():
        state = "is not a file" if target.exists() else "does not exist"
        yield diag("QAS301", f"{what} {relative!r} {state}", path,
                   hint="paths are relative to the spec file, not the current directory")


def _check_output(spec: Spec) -> Iterator[Diagnostic]:
    if spec.output.allow_outside_workspace:
        return
    root = spec.workspace.resolve()
    for key, value in (("dir", spec.output.dir), ("temp_dir", spec.output.temp_dir)):
        if value is None:
            continue
        target = spec_path(spec, value).resolve()
        if target != root and root not in target.parents:
            yield diag("QAS302", f"output.{key} {value!r} leaves the spec's folder",
                       spec.output.path + (key,),
                       hint="keep outputs beside the spec, or set output.allow_outside_workspace: true")
        elif target == root:
            yield diag("QAS302", f"output.{key} must be a sub-folder, not the spec's own folder",
                       spec.output.path + (key,), hint="for example autosearch_output")
