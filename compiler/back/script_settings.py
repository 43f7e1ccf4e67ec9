"""The runtime's Settings from the derivation: a checked Spec and its Facts in; the Settings the script runs with out,
every path relative to the output folder. A setting the engine does not read keeps its default."""

from __future__ import annotations

import dataclasses
import operator
import os
from pathlib import Path
from typing import Any

from compiler.back.facts import Facts, ReaderFacts, sha256_text
from compiler.check.images import resolved
from compiler.check.requirements import requirements
from compiler.check.resolved import (
    heartbeat_and_grace,
    higher_is_better,
    labels_settings,
    max_failures,
    objectives,
    seconds,
    spec_path,
    stop,
    storage_kind,
    tolerance,
)
from compiler.front.model import ReaderSpec, Spec
from compiler.runtime.settings import Settings

DEFAULT_TEMP_DIR = "tmp"  # Quark's scratch folder, inside the output dir, when output.temp_dir is not written


def relative(path: Path, out_abs: Path) -> str:
    """An absolute path in; the same path relative to the output folder, with forward slashes, out."""
    return os.path.relpath(path, out_abs).replace(os.sep, "/")


def reader_settings(r: ReaderSpec, found: ReaderFacts, out_abs: Path) -> dict[str, Any]:
    """A reader of the spec in; the runtime's reader description (Settings.calibration / eval_data) out."""
    if r.folder is not None:
        return {"folder": relative(found.path, out_abs), "limit": r.limit}
    if r.images is not None:
        return {"images": relative(found.path, out_abs), "limit": r.limit, "input": found.input,
                "preprocess": resolved(r.preprocess)}
    return {"file": relative(found.path, out_abs), "class": r.reader.rsplit(":", 1)[1], "args": dict(r.args)}


def evaluator_settings(spec: Spec, facts: Facts, out_abs: Path) -> dict[str, Any] | None:
    """The spec's user evaluator as the runtime reads it, or None for a built-in metric."""
    if facts.evaluator is None:
        return None
    return {"file": relative(facts.evaluator, out_abs), "function": spec.evaluation.evaluator.rsplit(":", 1)[1],
            "higher_is_better": higher_is_better(spec)}


def storage_settings(spec: Spec, output_dir: Path) -> dict[str, Any]:
    """The storage as Settings reads it; a relative artifacts folder is resolved against the spec and given
    relative to the output folder (like every path of the settings), an absolute one is kept as written."""
    kind = storage_kind(spec)
    if kind != "url":
        return {"kind": kind}
    s = spec.storage
    artifacts = s.artifacts
    if artifacts is not None and not os.path.isabs(artifacts):
        artifacts = os.path.relpath(spec_path(spec, artifacts), output_dir).replace(os.sep, "/")
    heartbeat, grace = heartbeat_and_grace(spec)
    return {"kind": "url", "env": s.url_env, "artifacts": artifacts, "heartbeat": heartbeat, "grace": grace}



def as_written(spec: Spec) -> dict[str, Any]:
    """A checked Spec in; every Settings field declared as copied from the spec unchanged (its metadata "spec": a
    dotted path in Spec) with the spec's value out."""
    return {f.name: operator.attrgetter(f.metadata["spec"])(spec) for f in dataclasses.fields(Settings)
            if "spec" in f.metadata}


def build_settings(spec: Spec, facts: Facts) -> Settings:
    """Every setting of the compiled search; `script` is the script's file name (the script itself passes
    __file__)."""
    out_abs = facts.output_dir
    ev = spec.evaluation
    built = Settings(
        script=facts.script_file,
        engine=facts.engine.name,
        spec_hash=sha256_text(spec.text),
        space_hash=facts.space_hash,
        torch_device=facts.torch_device,
        model=relative(facts.model, out_abs),
        model_sha256=facts.model_sha256,
        calibration=reader_settings(spec.calibration, facts.calibration, out_abs),
        eval_data=reader_settings(ev.data, facts.eval_data, out_abs) if ev.data is not None else None,
        metric=ev.metric,
        evaluator=evaluator_settings(spec, facts, out_abs),
        labels=labels_settings(spec, out_abs),
        direction=facts.direction,
        n_trials=facts.budget.effective_trials,
        two_stage=facts.two_stage,
        grid_configs=facts.budget.grid_configs,
        study_name=facts.study_name,
        study_db=facts.study_file,
        temp_dir=relative(spec_path(spec, spec.output.temp_dir), out_abs) if spec.output.temp_dir else DEFAULT_TEMP_DIR,
        max_failures=max_failures(spec),
        trial_timeout=seconds(spec.search.trial_timeout),
        calibration_cache=spec.search.calibration_cache is not False,
        keep_float={"nodes": list(spec.keep_float.nodes), "op_types": list(spec.keep_float.op_types),
                    "subgraphs": [list(p) for p in spec.keep_float.subgraphs]},
        sensitivity=facts.sensitivity,
        workers=facts.workers,
        storage=storage_settings(spec, out_abs),
        objectives=objectives(spec),
        tolerance=tolerance(spec),
        mlflow=None if spec.output.mlflow is None else {"env": spec.output.mlflow["tracking_uri_env"],
                                                        "experiment": spec.output.mlflow.get("experiment", spec.name)},
        stop=stop(spec),
        requirements=requirements(spec),
        search_space=facts.space,
        **as_written(spec),
    )
    return dataclasses.replace(built, **{name: default(name) for name in facts.engine.unsupported_settings()})


_NO_DEFAULT = object()


def _default_of(f: dataclasses.Field) -> Any:
    """A Settings field in; its default (a fresh one for a default factory) out, or _NO_DEFAULT."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _NO_DEFAULT if f.default is dataclasses.MISSING else f.default


def default(name: str) -> Any:
    """A Settings field's name in; its default value out (a fresh one for a default factory)."""
    found = _default_of(Settings.__dataclass_fields__[name])
    if found is _NO_DEFAULT:
        raise ValueError(f"Settings.{name} has no default")
    return found


def non_default(settings: Settings) -> list[tuple[dataclasses.Field, Any]]:
    """Settings in; each field whose value is not its default (or that has none), with the value, in declaration
    order out."""
    return [(f, getattr(settings, f.name)) for f in dataclasses.fields(Settings)
            if getattr(settings, f.name) != _default_of(f)]


def settings_json(settings: Settings) -> dict[str, Any]:
    """Settings in; the fields a spec decided (defaults left out) as JSON-ready data out (quant_plan.json)."""
    return {f.name: value for f, value in non_default(settings)}
