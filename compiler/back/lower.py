"""Lowering: a checked Spec, its derived Facts and the target Environment in, a render-ready Plan out.

Everything is already resolved in the Facts (`facts.derive`); lowering only arranges it for the
templates: the runtime Settings (back/script_settings.py) and what only compile reports (budget, estimate, launch
files).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from compiler.back.cost import TimeEstimate, estimate
from compiler.back.facts import Facts
from compiler.back.script_settings import build_settings, relative, settings_json
from compiler.check.budget_facts import Budget
from compiler.check.cluster import launch_plan
from compiler.check.resolved import higher_is_better
from compiler.check.target_env import Environment, describe
from compiler.front.model import Spec
from compiler.runtime.settings import Settings


@dataclass(frozen=True)
class Plan:
    """What the templates and the plan printout read: the runtime Settings, and what only compile knows."""

    settings: Settings  # every value the script runs with (back/script_settings.py); defaults left out of its text
    spec_file: str  # base name of the spec, for the header line
    spec_rel: str  # spec path relative to the output dir
    name: str
    external_data: str | None  # relative to the output dir
    higher_is_better: bool | None  # the metric's or the evaluator's (None: neither; the run manifest says it)
    preset: str | None
    budget: Budget
    time_estimate: TimeEstimate
    output_dir: str  # relative to the spec's folder
    script: str  # file name of the script inside the output dir
    launch: dict[str, dict[str, Any]]  # cluster launch files, keyed kubernetes / slurm (cluster.launch_plan)
    environment: dict[str, Any]  # what the target environment has (manifest only: it differs per machine)
    model_analysis: dict[str, Any]

    @property
    def uses_images(self) -> bool:
        """The script needs the image reader (and Pillow)."""
        return any(r is not None and "images" in r for r in (self.settings.calibration, self.settings.eval_data))

    def to_json(self) -> dict[str, Any]:
        """quant_plan.json's data: the plan's own facts, then the settings a spec decided (defaults left out)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("settings", "environment", "model_analysis")}  # those two have files of their own
        data["budget"] = asdict(self.budget)
        data["time_estimate"] = asdict(self.time_estimate)
        if math.isinf(data["budget"]["distinct_configs"]):
            data["budget"]["distinct_configs"] = None  # unbounded: continuous ranges
        else:
            data["budget"]["distinct_configs"] = int(data["budget"]["distinct_configs"])
        estimate_data = data["time_estimate"]
        estimate_data["startup_s"] = round(estimate_data["startup_s"], 1)
        estimate_data["per_trial_s"] = {k: round(v, 3) for k, v in estimate_data["per_trial_s"].items()}
        estimate_data["total_s"] = [round(v, 1) for v in estimate_data["total_s"]]
        return {**data, "settings": settings_json(self.settings)}


def lower(spec: Spec, facts: Facts, env: Environment) -> Plan:
    out_abs = facts.output_dir
    settings = build_settings(spec, facts)
    return Plan(
        settings=settings,
        spec_file=spec.file.name,
        spec_rel=relative(spec.file, out_abs),
        name=spec.name,
        external_data=relative(facts.external_data, out_abs) if facts.external_data else None,
        higher_is_better=higher_is_better(spec),
        preset=spec.search.preset,
        budget=facts.budget,
        time_estimate=estimate(facts),
        output_dir=relative(out_abs, spec.workspace),
        script=facts.script_file,
        launch=launch_plan(spec, relative(out_abs, spec.workspace), facts.script_file),
        environment=describe(env, list(settings.requirements)),
        model_analysis={**facts.analysis, "samples": facts.samples},
    )
