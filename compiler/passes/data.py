"""Data pass: Spec in; QAS706-709 out. Samples are checked against the model inputs, user files by ast.

Sample files are read only as far as their .npy headers; user code is parsed, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic, YamlPath, diag
from ..model import ReaderSpec, Spec
from ..samples import read_headers, sample_files
from ..suggest import did_you_mean
from .intake import analysis
from .resolve import spec_path


def sample_counts(spec: Spec) -> dict[str, int | None]:
    """Samples per reader (None for a user reader class: unknown until it runs)."""
    counts: dict[str, int | None] = {}
    for key, reader in (("calibration", spec.calibration), ("evaluation", spec.evaluation.data)):
        if reader is not None:
            counts[key] = len(sample_files(spec_path(spec, reader.folder), reader.limit)) if reader.folder else None
    return counts


def check(spec: Spec) -> Iterator[Diagnostic]:
    inputs = analysis(spec)["inputs"]
    for reader in (spec.calibration, spec.evaluation.data):
        if reader is None:
            continue
        if reader.folder is not None:
            yield from _check_folder(spec, reader, inputs)
        else:
            file, name = reader.reader.rsplit(":", 1)
            yield from _check_defines(spec, file, name, reader.path + ("reader",), ast.ClassDef, "class")
    if spec.evaluation.evaluator is not None:
        file, name = spec.evaluation.evaluator.rsplit(":", 1)
        yield from _check_defines(spec, file, name, spec.evaluation.path + ("evaluator",), ast.FunctionDef, "function")


def _check_folder(spec: Spec, reader: ReaderSpec, inputs: list[dict[str, Any]]) -> Iterator[Diagnostic]:
    at = reader.path + ("folder",)
    files = sample_files(spec_path(spec, reader.folder), reader.limit)
    if not files:
        yield diag("QAS706", f"no .npy or .npz samples in {reader.folder!r}", at,
                   hint="save samples with numpy.save (one input) or numpy.savez (named inputs)")
        return
    names = [i["name"] for i in inputs]
    for path in files:
        label = f"{reader.folder}/{path.name}"
        try:
            headers = read_headers(path)
        except ValueError as exc:
            yield diag("QAS708", f"sample {label!r} cannot be read: {exc}", at)
            continue
        if None in headers and len(inputs) != 1:
            yield diag("QAS707", f"sample {label!r} is a .npy file, but the model has {len(inputs)} inputs "
                                 f"({', '.join(names)})", at, hint="save multi-input samples as .npz keyed by input name")
            continue
        for model_input in inputs:
            key = None if None in headers else model_input["name"]
            if key not in headers:
                yield diag("QAS707", f"sample {label!r} has no array for model input {model_input['name']!r} "
                                     f"(it has {', '.join(sorted(k for k in headers if k))})", at)
                continue
            problem = _mismatch(headers[key], model_input)
            if problem:
                yield diag("QAS707", f"sample {label!r} does not fit input {model_input['name']!r}: {problem}", at)


def _mismatch(header: tuple[str, tuple[int, ...]], model_input: dict[str, Any]) -> str | None:
    dtype, shape = header
    if dtype != model_input["dtype"]:
        return f"dtype {dtype}, the model wants {model_input['dtype']}"
    want = model_input["shape"]
    if want is None:
        return None
    if len(shape) != len(want):
        return f"rank {len(shape)} {list(shape)}, the model wants rank {len(want)} {want}"
    for axis, (got, expected) in enumerate(zip(shape, want, strict=True)):
        if isinstance(expected, int) and expected > 0 and got != expected:
            return f"dim {axis} is {got}, the model wants {expected} (shape {list(shape)} vs {want})"
    return None


def _check_defines(spec: Spec, file: str, name: str, at: YamlPath, kind: type, word: str) -> Iterator[Diagnostic]:
    path: Path = spec_path(spec, file)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        yield diag("QAS709", f"{file!r} does not parse: line {exc.lineno}: {exc.msg}", at)
        return
    except (OSError, UnicodeDecodeError) as exc:
        yield diag("QAS709", f"{file!r} cannot be read: {exc}", at)
        return
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {(a.asname or a.name).split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    if name not in defined | assigned | imported:
        yield diag("QAS709", f"{file!r} defines no top-level {word} {name!r}", at,
                   hint=did_you_mean(name, sorted(defined)))
