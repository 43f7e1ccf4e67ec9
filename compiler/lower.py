"""Lowering: a checked Spec and its target Environment in, a render-ready Plan out (everything resolved, every Quark key explicit)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from .cost import TimeEstimate, estimate
from .environment import Environment, describe
from .images import resolved
from .model import DEFAULT_MAX_FAILURES, ReaderSpec, Spec
from .budget import Budget, count_budget, external_data_path
from .intake import analysis
from .requirements import requirements
from .resolved import direction, merged_space, sample_counts, spec_path, torch_device, two_stage
from .spacemath import with_device

QAS_FORMAT = 1



@dataclass(frozen=True)
class ReaderPlan:
    kind: str  # "folder" | "images" | "class"
    folder: str | None  # the sample or image folder, relative to the output dir
    limit: int | None
    file: str | None  # relative to the output dir
    name: str | None
    args: dict[str, Any]
    preprocess: dict[str, Any] | None = None  # images: every step explicit (images.resolved)
    input: str | None = None  # images: the model input the images feed


@dataclass(frozen=True)
class Plan:
    spec_file: str  # base name of the spec, for the header line
    spec_rel: str  # spec path relative to the output dir
    spec_hash: str
    name: str
    engine: str
    model: str  # relative to the output dir
    external_data: str | None
    calibration: ReaderPlan
    eval_data: ReaderPlan | None
    metric: str | None
    evaluator_file: str | None
    evaluator_function: str | None
    higher_is_better: bool | None
    direction: str
    preset: str | None
    space_hash: str
    space: dict[str, Any]
    sampler: str
    seed: int
    two_stage: bool
    budget: Budget
    time_estimate: TimeEstimate
    device: str
    torch_device: str
    output_dir: str  # relative to the spec's folder
    temp_dir: str  # relative to the output dir
    plots: bool
    study_name: str
    study_db: str  # file name inside the output dir
    resume: bool
    script: str  # file name of the script inside the output dir
    max_failures: int  # engine qas: FAIL trials in the study before the search stops
    keep_models: str  # engine qas: "all" | "best" | "top-K"
    keep_float: dict[str, Any]  # engine qas: {"nodes": [...], "op_types": [...], "subgraphs": [[start, end]]}
    requirements: dict[str, str]
    environment: dict[str, Any]  # what the target environment has (manifest only: it differs per machine)
    model_analysis: dict[str, Any]

    @property
    def uses_images(self) -> bool:
        """The script needs the image reader (and Pillow)."""
        return any(r is not None and r.kind == "images" for r in (self.calibration, self.eval_data))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["model_analysis"]  # written to model_analysis.json
        del data["environment"]  # recorded in run_manifest.yaml
        for key in ("calibration", "eval_data"):
            if data[key] is not None and data[key]["kind"] != "images":
                del data[key]["preprocess"], data[key]["input"]  # only image readers have them
        if math.isinf(data["budget"]["distinct_configs"]):
            data["budget"]["distinct_configs"] = None  # unbounded: continuous ranges
        else:
            data["budget"]["distinct_configs"] = int(data["budget"]["distinct_configs"])
        estimate_data = data["time_estimate"]
        estimate_data["per_trial_s"] = {k: round(v, 3) for k, v in estimate_data["per_trial_s"].items()}
        estimate_data["total_s"] = [round(v, 1) for v in estimate_data["total_s"]]
        return data


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_hash(value: Any) -> str:
    """A hash of a JSON value that keeps key order (order matters in Quark's grammar)."""
    return sha256_text(json.dumps(value, separators=(",", ":"), ensure_ascii=True))


def _rel(spec: Spec, relative: str, out_abs: str) -> str:
    return os.path.relpath(spec_path(spec, relative), out_abs).replace(os.sep, "/")


def _reader(spec: Spec, r: ReaderSpec, out_abs: str) -> ReaderPlan:
    if r.folder is not None:
        return ReaderPlan(kind="folder", folder=_rel(spec, r.folder, out_abs), limit=r.limit,
                          file=None, name=None, args={})
    if r.images is not None:
        only_input = analysis(spec)["inputs"][0]["name"]  # the data pass checked there is exactly one
        return ReaderPlan(kind="images", folder=_rel(spec, r.images, out_abs), limit=r.limit, file=None, name=None,
                          args={}, preprocess=resolved(r.preprocess), input=only_input)
    file, name = r.reader.rsplit(":", 1)
    return ReaderPlan(kind="class", folder=None, limit=None, file=_rel(spec, file, out_abs), name=name,
                      args=dict(r.args))


def study_name(spec: Spec, space: dict[str, Any]) -> str:
    """Engine qas names the study by the resolved space, so a changed space starts a new study."""
    base = spec.output.study_name or spec.name
    return f"{base}-{canonical_hash(space)[:12]}" if spec.search.engine == "qas" else base


def lower(spec: Spec, env: Environment) -> Plan:
    out_abs = str(spec_path(spec, spec.output.dir))
    budget = count_budget(spec)
    device_for_torch = torch_device(spec.device)
    space = with_device(merged_space(spec), device_for_torch)
    ev = spec.evaluation
    evaluator_file = evaluator_function = None
    if ev.evaluator is not None:
        file, evaluator_function = ev.evaluator.rsplit(":", 1)
        evaluator_file = _rel(spec, file, out_abs)
    ext = external_data_path(spec)
    temp_dir = _rel(spec, spec.output.temp_dir, out_abs) if spec.output.temp_dir else "tmp"
    return Plan(
        spec_file=spec.file.name,
        spec_rel=os.path.relpath(spec.file, out_abs).replace(os.sep, "/"),
        spec_hash=sha256_text(spec.text),
        name=spec.name,
        engine=spec.search.engine,
        model=_rel(spec, spec.model, out_abs),
        external_data=os.path.relpath(ext, out_abs).replace(os.sep, "/") if ext else None,
        calibration=_reader(spec, spec.calibration, out_abs),
        eval_data=_reader(spec, ev.data, out_abs) if ev.data is not None else None,
        metric=ev.metric,
        evaluator_file=evaluator_file,
        evaluator_function=evaluator_function,
        higher_is_better=ev.higher_is_better,
        direction=direction(spec),
        preset=spec.search.preset,
        space_hash=canonical_hash(space),
        space=space,
        sampler=spec.search.sampler,
        seed=spec.search.seed,
        two_stage=two_stage(spec),
        budget=budget,
        time_estimate=estimate(spec, budget),
        device=spec.device,
        torch_device=device_for_torch,
        output_dir=os.path.relpath(out_abs, spec.workspace).replace(os.sep, "/"),
        temp_dir=temp_dir,
        plots=spec.output.plots,
        study_name=study_name(spec, space),
        study_db=f"{spec.name}_study.db",
        resume=spec.output.resume,
        script=f"{spec.name}_autosearch.py",
        max_failures=spec.search.max_failures if spec.search.max_failures is not None else DEFAULT_MAX_FAILURES,
        keep_models=spec.output.keep_models,
        keep_float={"nodes": list(spec.keep_float.nodes), "op_types": list(spec.keep_float.op_types),
                    "subgraphs": [list(p) for p in spec.keep_float.subgraphs]},
        requirements=requirements(spec),
        environment=describe(env, list(requirements(spec))),
        model_analysis={**analysis(spec), "samples": sample_counts(spec)},
    )
