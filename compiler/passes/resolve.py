"""Resolve pass: Spec in; QAS30x diagnostics out for presets, overrides and paths.

Also holds the pure resolution helpers the later passes and lowering share: the merged
search space (preset + override) and spec-relative paths.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic, diag
from ..model import ReaderSpec, Spec
from ..presets import preset_config


def spec_path(spec: Spec, relative: str) -> Path:
    """A path written in the spec in, an absolute normalized path out (relative to the spec's folder)."""
    return Path(os.path.normpath(spec.workspace / relative))


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key, anything else replaces; null removes the key. Inputs are not changed."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged_space(spec: Spec) -> dict[str, Any]:
    """The search space as written: the custom space, or the preset's with the override merged on."""
    if spec.search.space is not None:
        return copy.deepcopy(spec.search.space)
    base = preset_config(spec.search.preset)["search_space"]
    return deep_merge(base, spec.search.override or {})


def two_stage(spec: Spec) -> bool:
    if spec.search.two_stage is not None:
        return spec.search.two_stage
    if spec.search.preset is not None:
        return bool(preset_config(spec.search.preset)["two_stage_search"])
    return False


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
