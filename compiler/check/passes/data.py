"""Data pass: Spec in; QAS706-709 and QAS711-715 out. Samples are checked against the model inputs, user files by ast.

Sample files are read only as far as their .npy headers, images only as far as Pillow's verify
(no pixels decoded); an image reader's tensor is derived from its declared preprocessing. User
code is parsed, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from compiler.check.images import IMAGE_SUFFIXES, INTEGER_DTYPES, channels, image_files, image_problem, tensor_header
from compiler.check.intake_facts import analysis
from compiler.check.resolved import spec_path
from compiler.check.samples import read_headers, sample_files
from compiler.diagnostics import Diagnostic, YamlPath, diag
from compiler.front.model import PreprocessSpec, ReaderSpec, Spec
from compiler.front.suggest import closest, did_you_mean


def check(spec: Spec) -> Iterator[Diagnostic]:
    inputs = analysis(spec)["inputs"]
    for reader in (spec.calibration, spec.evaluation.data):
        if reader is None:
            continue
        if reader.folder is not None:
            yield from _check_folder(spec, reader, inputs)
        elif reader.images is not None:
            yield from _check_images(spec, reader, inputs)
        else:
            file, name = reader.reader.rsplit(":", 1)
            yield from _check_defines(spec, file, name, (*reader.path, "reader"), ast.ClassDef, "class")
    if spec.evaluation.evaluator is not None:
        file, name = spec.evaluation.evaluator.rsplit(":", 1)
        yield from _check_defines(spec, file, name, (*spec.evaluation.path, "evaluator"), ast.FunctionDef, "function")


def _check_folder(spec: Spec, reader: ReaderSpec, inputs: list[dict[str, Any]]) -> Iterator[Diagnostic]:
    at = (*reader.path, "folder")
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
            yield diag("QAS708", f"sample {label!r} cannot be read: {exc}", at,
                       hint="write it again with numpy.save (one input) or numpy.savez (named inputs)")
            continue
        if None in headers and len(inputs) != 1:
            yield diag("QAS707", f"sample {label!r} is a .npy file, but the model has {len(inputs)} inputs "
                                 f"({', '.join(names)})", at,
                       hint="save multi-input samples as .npz keyed by input name")
            continue
        for model_input in inputs:
            key = None if None in headers else model_input["name"]
            if key not in headers:
                held = sorted(k for k in headers if k)
                rename = (f"name the array after the input: np.savez(path, {model_input['name']}=np.load(path)"
                          f"[{held[0]!r}])" if len(held) == 1 and len(inputs) == 1
                          and model_input["name"].isidentifier() else None)
                yield diag("QAS707", f"sample {label!r} has no array for model input {model_input['name']!r} "
                                     f"(it has {', '.join(held)})", at, hint=rename)
                continue
            problem = _mismatch(headers[key], model_input)
            if problem:
                yield diag("QAS707", f"sample {label!r} does not fit input {model_input['name']!r}: {problem}", at,
                           hint=_conversion(headers[key], model_input, key))


def _check_images(spec: Spec, reader: ReaderSpec, inputs: list[dict[str, Any]]) -> Iterator[Diagnostic]:
    at = (*reader.path, "images")
    files = image_files(spec_path(spec, reader.images), reader.limit)
    if not files:
        yield diag("QAS711", f"no images ({', '.join(IMAGE_SUFFIXES)}) in {reader.images!r}", at,
                   hint="the image reader takes those suffixes, in any case, read in name order")
    for path in files:
        problem = image_problem(path)
        if problem:
            yield diag("QAS712", f"image {reader.images + '/' + path.name!r} cannot be used: {problem}", at)
    preprocess = reader.preprocess
    yield from _check_preprocess(preprocess)
    unfed = _unfed_input(reader, inputs)
    if unfed is not None:
        yield unfed
        return
    dtype, shape = tensor_header(preprocess)
    problem = _mismatch((dtype, shape), inputs[0])
    if problem:
        yield diag("QAS714", f"images preprocessed to {dtype} {list(shape)} do not fit input {inputs[0]['name']!r}: "
                             f"{problem}", preprocess.path,
                   hint="set preprocess resize ([height, width]), layout, color (RGB/BGR: 3 channels, L: 1) and dtype "
                        "to what the model takes", at_key=True)


def _check_preprocess(preprocess: PreprocessSpec) -> Iterator[Diagnostic]:
    if preprocess.dtype in INTEGER_DTYPES:
        raw = "the raw pixels" if preprocess.dtype == "uint8" else "the pixels minus 128"
        for key in ("scale", "mean", "std"):
            if getattr(preprocess, key) is not None:
                yield diag("QAS713", f"preprocess.{key} does not apply to dtype {preprocess.dtype}, which takes {raw}",
                           (*preprocess.path, key), hint=f"drop {key}, or use dtype float32 or float16", at_key=True)
        return
    count = channels(preprocess)
    for key in ("mean", "std"):
        values = getattr(preprocess, key)
        if values is not None and len(values) != count:
            yield diag("QAS713", f"preprocess.{key} has {_count(len(values), 'value')}, but color {preprocess.color} "
                                 f"has {_count(count, 'channel')}", (*preprocess.path, key),
                       hint=f"write {_count(count, 'value')}, one per channel in {preprocess.color} order")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _unfed_input(reader: ReaderSpec, inputs: list[dict[str, Any]]) -> Diagnostic | None:
    """A QAS715 unless the model has exactly one input and `input`, when written, names it."""
    names = [i["name"] for i in inputs]
    if len(inputs) != 1:
        return diag("QAS715", f"an image folder feeds one input, but the model has {len(inputs)} "
                             f"({', '.join(names) or 'none'})", (*reader.path, "images"),
                    hint="write a reader class (reader: file.py:Class) whose get_next() returns every input")
    if reader.input is not None and reader.input != names[0]:
        return diag("QAS715", f"input {reader.input!r} is not a model input; the model's only input is {names[0]!r}",
                    (*reader.path, "input"),
                    hint=f"did you mean {names[0]!r}?" if closest(reader.input, names) else
                    "write that name, or leave input out")
    return None


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


def _conversion(header: tuple[str, tuple[int, ...]], model_input: dict[str, Any], key: str | None) -> str | None:
    """A sample's (dtype, shape), the model input it misfits and its .npz key (None: a .npy) in; how to convert
    it with numpy out, for a wrong dtype or a missing or extra leading axis (None for other mismatches)."""
    dtype, shape = header
    want = model_input["shape"]
    if dtype != model_input["dtype"]:
        change, what = f'.astype("{model_input["dtype"]}")', f"convert it to {model_input['dtype']}"
    elif want is not None and len(shape) + 1 == len(want):
        change, what = "[np.newaxis]", "add the batch axis (or np.expand_dims(array, 0))"
    elif want is not None and len(shape) == len(want) + 1 and shape[:1] == (1,):
        change, what = "[0]", "drop the leading axis of size 1 (or np.squeeze(array, 0))"
    else:
        return None
    if key is None:
        return f"{what}: np.save(path, np.load(path){change})"
    return f"{what}: arrays = dict(np.load(path)); arrays[{key!r}] = arrays[{key!r}]{change}; np.savez(path, **arrays)"


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
