"""Lowering: a checked Spec, its derived Facts and the target Environment in, a render-ready Plan out.

Everything is already resolved in the Facts (`facts.derive`); lowering only arranges it for the
templates: paths relative to the output dir, every Quark key explicit.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from compiler.back.cost import TimeEstimate, estimate
from compiler.back.facts import Facts, ReaderFacts, sha256_text
from compiler.check.budget_facts import Budget
from compiler.check.cluster import launch_plan
from compiler.check.images import resolved
from compiler.check.requirements import requirements
from compiler.check.resolved import higher_is_better, labels_settings
from compiler.check.target_env import Environment, describe
from compiler.front.model import ReaderSpec, Spec


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
    model_sha256: dict[str, str]  # the model file and its external data (names relative to the model's folder)
    calibration: ReaderPlan
    eval_data: ReaderPlan | None
    metric: str | None
    evaluator_file: str | None
    evaluator_function: str | None
    higher_is_better: bool | None
    labels: dict[str, Any] | None  # top1/top5: {"array": name} | {"file": path relative to the output dir}
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
    trial_timeout: float | None  # engine qas: seconds a trial may run; None: no limit
    keep_models: str  # engine qas: "all" | "best" | "top-K"
    keep_float: dict[str, Any]  # engine qas: {"nodes": [...], "op_types": [...], "subgraphs": [[start, end]]}
    sensitivity: dict[str, Any] | None  # engine qas: Settings.sensitivity (facts.sensitivity_settings), or None
    workers: int  # worker processes `python <script>` starts on this machine
    storage: dict[str, Any]  # Settings.storage (the URL's variable name, never its value)
    mlflow: dict[str, str] | None  # Settings.mlflow: {"env": the tracking URI's variable, "experiment": name}, or None
    launch: dict[str, dict[str, Any]]  # cluster launch files, keyed kubernetes / slurm (cluster.launch_plan)
    requirements: dict[str, str]
    objectives: list[str]  # engine qas: each trial's values, in contract.OBJECTIVES order
    tolerance: dict[str, Any] | None  # engine qas: {"value", "relative"}; None: none declared
    stop: dict[str, Any] | None  # engine qas: search.stop with its defaults; None: runs to the budget
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
        if data["objectives"] == ["accuracy"]:
            del data["objectives"]  # only what a spec declares: plans of earlier specs keep their bytes
        for key in ("tolerance", "stop", "labels", "mlflow"):
            if data[key] is None:
                del data[key]
        for key in ("calibration", "eval_data"):
            if data[key] is not None and data[key]["kind"] != "images":
                del data[key]["preprocess"], data[key]["input"]  # only image readers have them
        if math.isinf(data["budget"]["distinct_configs"]):
            data["budget"]["distinct_configs"] = None  # unbounded: continuous ranges
        else:
            data["budget"]["distinct_configs"] = int(data["budget"]["distinct_configs"])
        estimate_data = data["time_estimate"]
        estimate_data["startup_s"] = round(estimate_data["startup_s"], 1)
        estimate_data["per_trial_s"] = {k: round(v, 3) for k, v in estimate_data["per_trial_s"].items()}
        estimate_data["total_s"] = [round(v, 1) for v in estimate_data["total_s"]]
        return data


def _rel(path: Path, out_abs: Path) -> str:
    return os.path.relpath(path, out_abs).replace(os.sep, "/")


def _reader(r: ReaderSpec, found: ReaderFacts, out_abs: Path) -> ReaderPlan:
    if r.folder is not None:
        return ReaderPlan(kind="folder", folder=_rel(found.path, out_abs), limit=r.limit,
                          file=None, name=None, args={})
    if r.images is not None:
        return ReaderPlan(kind="images", folder=_rel(found.path, out_abs), limit=r.limit, file=None, name=None,
                          args={}, preprocess=resolved(r.preprocess), input=found.input)
    return ReaderPlan(kind="class", folder=None, limit=None, file=_rel(found.path, out_abs),
                      name=r.reader.rsplit(":", 1)[1], args=dict(r.args))


def lower(spec: Spec, facts: Facts, env: Environment) -> Plan:
    out_abs = facts.output_dir
    ev = spec.evaluation
    needs = requirements(spec)
    return Plan(
        spec_file=spec.file.name,
        spec_rel=_rel(spec.file, out_abs),
        spec_hash=sha256_text(spec.text),
        name=spec.name,
        engine=facts.engine.name,
        model=_rel(facts.model, out_abs),
        external_data=_rel(facts.external_data, out_abs) if facts.external_data else None,
        model_sha256=facts.model_sha256,
        calibration=_reader(spec.calibration, facts.calibration, out_abs),
        eval_data=_reader(ev.data, facts.eval_data, out_abs) if ev.data is not None else None,
        metric=ev.metric,
        evaluator_file=_rel(facts.evaluator, out_abs) if facts.evaluator is not None else None,
        evaluator_function=ev.evaluator.rsplit(":", 1)[1] if ev.evaluator is not None else None,
        higher_is_better=higher_is_better(spec),
        labels=labels_settings(spec, out_abs),
        direction=facts.direction,
        preset=spec.search.preset,
        space_hash=facts.space_hash,
        space=facts.space,
        sampler=spec.search.sampler,
        seed=spec.search.seed,
        two_stage=facts.two_stage,
        budget=facts.budget,
        time_estimate=estimate(facts),
        device=spec.device,
        torch_device=facts.torch_device,
        output_dir=_rel(out_abs, spec.workspace),
        temp_dir=_rel(facts.temp_dir, out_abs),
        plots=spec.output.plots,
        study_name=facts.study_name,
        study_db=facts.study_file,
        resume=spec.output.resume,
        script=facts.script_file,
        max_failures=facts.max_failures,
        trial_timeout=facts.trial_timeout,
        keep_models=spec.output.keep_models,
        keep_float={"nodes": list(spec.keep_float.nodes), "op_types": list(spec.keep_float.op_types),
                    "subgraphs": [list(p) for p in spec.keep_float.subgraphs]},
        sensitivity=facts.sensitivity,
        workers=facts.workers,
        storage=facts.storage,
        mlflow=None if spec.output.mlflow is None else {"env": spec.output.mlflow["tracking_uri_env"],
                                                        "experiment": spec.output.mlflow.get("experiment", spec.name)},
        launch=launch_plan(spec, _rel(out_abs, spec.workspace), facts.script_file),
        requirements=needs,
        objectives=facts.objectives,
        tolerance=facts.tolerance,
        stop=facts.stop,
        environment=describe(env, list(needs)),
        model_analysis={**facts.analysis, "samples": facts.samples},
    )
