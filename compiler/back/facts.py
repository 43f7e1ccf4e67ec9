"""Facts derived once: a Spec that passed every pass in, one frozen Facts out (what lowering and the estimate read).

Each fact comes from the same function the passes call (`resolved`, `intake`, `budget`), so the
logic lives once; `derive` only records the results, with every default applied. The mappings
inside (space, analysis, samples) are plain data: treat them as read-only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.check.budget_facts import Budget, count_budget, external_data_path
from compiler.check.intake_facts import analysis
from compiler.check.resolved import (
    direction,
    engine,
    merged_space,
    sample_counts,
    spec_path,
    storage_kind,
    torch_device,
    two_stage,
)
from compiler.check.spacemath import with_device
from compiler.front.model import ReaderSpec, Spec
from compiler.runtime.contract import STUDY_HASH_CHARS, Engine, script_file, study_file
from compiler.runtime.sensitivity import base_config, options


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_hash(value: Any) -> str:
    """A hash of a JSON value that keeps key order (order matters in Quark's grammar)."""
    return sha256_text(json.dumps(value, separators=(",", ":"), ensure_ascii=True))


def file_sha256(path: Path) -> str:
    """A file's content hash (read in chunks; a model of many GB costs seconds, not memory)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def model_contents(model: Path, model_facts: dict[str, Any]) -> dict[str, str]:
    """The model file and each external data file it names, by name relative to the model's folder, -> sha256."""
    names = [model.name] + [e["location"] for e in model_facts["external_data"]]
    return {name: file_sha256(model.parent / name) for name in names}


@dataclass(frozen=True)
class ReaderFacts:
    """Where one reader's data or code is, resolved: a sample/image folder, or the reader class's file."""

    path: Path  # absolute
    input: str | None = None  # an image folder: the one model input it feeds


@dataclass(frozen=True)
class Facts:
    engine: Engine  # the contract's record of search.engine
    space: dict[str, Any]  # merged (preset + override, or the custom space), every device field set
    space_hash: str  # canonical_hash(space)
    two_stage: bool  # the spec's setting, else the preset's
    torch_device: str  # the declared device as torch names it (rocm:N -> cuda:N)
    direction: str  # "minimize" | "maximize"
    study_name: str  # output.study_name or name; engines with space_in_study_name add the space hash
    study_file: str  # file name inside the output dir (storage url: the base name of the local lock files)
    workers: int  # worker processes on this machine (search.workers)
    script_file: str  # file name inside the output dir
    model: Path  # absolute, like every path here
    external_data: Path | None  # the model's sibling external-data file, when there is one
    model_sha256: dict[str, str]  # the model file and its external data, relative to the model's folder -> sha256
    output_dir: Path
    calibration: ReaderFacts
    eval_data: ReaderFacts | None
    evaluator: Path | None  # the evaluator's file
    budget: Budget
    analysis: dict[str, Any]  # model_analysis.json without the sample counts (intake.analysis)
    samples: dict[str, int | None]  # samples per reader; None for a user reader class
    sensitivity: dict[str, Any] | None  # Settings.sensitivity (every option explicit), or None when the spec has none


def study_name(spec: Spec, record: Engine, space_hash: str) -> str:
    """Engines with space_in_study_name name the study by the resolved space, so a changed space starts a new study."""
    base = spec.output.study_name or spec.name
    return f"{base}-{space_hash[:STUDY_HASH_CHARS]}" if record.space_in_study_name else base


def _reader(spec: Spec, r: ReaderSpec, model_facts: dict[str, Any]) -> ReaderFacts:
    if r.folder is not None:
        return ReaderFacts(path=spec_path(spec, r.folder))
    if r.images is not None:  # the data pass checked that the model has exactly one input
        return ReaderFacts(path=spec_path(spec, r.images), input=model_facts["inputs"][0]["name"])
    return ReaderFacts(path=spec_path(spec, r.reader.rsplit(":", 1)[0]))


def derive(spec: Spec) -> Facts:
    """Every fact lowering needs, computed once; call only after every pass reported no error."""
    record = engine(spec)
    device = torch_device(spec.device)
    space = with_device(merged_space(spec), device)
    search = spec.keep_float.search if record.supports("sensitivity") else None
    # a searched keep_float prefix is a parameter of the space: a changed one starts a new study
    space_hash = canonical_hash(space if search is None else {"space": space, "keep_float_search": search})
    model_facts = analysis(spec)
    ev = spec.evaluation
    output_dir = spec_path(spec, spec.output.dir)
    return Facts(
        engine=record,
        space=space,
        space_hash=space_hash,
        two_stage=two_stage(spec),
        torch_device=device,
        direction=direction(spec),
        study_name=study_name(spec, record, space_hash),
        study_file=study_file(spec.name, storage_kind(spec)),
        workers=spec.search.workers,
        script_file=script_file(spec.name),
        model=spec_path(spec, spec.model),
        external_data=external_data_path(spec),
        model_sha256=model_contents(spec_path(spec, spec.model), model_facts),
        output_dir=output_dir,
        calibration=_reader(spec, spec.calibration, model_facts),
        eval_data=_reader(spec, ev.data, model_facts) if ev.data is not None else None,
        evaluator=spec_path(spec, ev.evaluator.rsplit(":", 1)[0]) if ev.evaluator is not None else None,
        budget=count_budget(spec),
        analysis=model_facts,
        samples=sample_counts(spec),
        sensitivity=(sensitivity_settings(spec, space)
                     if record.supports("sensitivity") and spec.keep_float.uses_sensitivity else None),
    )


def sensitivity_settings(spec: Spec, space: dict[str, Any]) -> dict[str, Any]:
    """keep_float's sensitivity keys with every default applied, the base configuration resolved (the space's first
    choices without fine-tuning, unless the spec names one)."""
    k = spec.keep_float
    given = dict(k.sensitivity or {})
    out = options(given)
    out["base"] = given["base"] if "base" in given else base_config(space)
    out["blocks"] = {name: list(patterns) for name, patterns in k.blocks.items()}
    out["search"] = k.search
    return out
