"""MLflow tracking (output.mlflow): a finished trial (Optuna FrozenTrial) in; one MLflow run in the experiment out.

Each run carries the trial's configuration flattened into params ("global_quant_config.activation.qscheme"), its
values as metrics by objective name (and intermediate values as a stepped `step_value` history, when recorded), and
tags: the stage, the trial number, its state, the study, the kept-in-float nodes. mlflow is imported only here and
only when output.mlflow is set; the tracking URI is read from the environment variable the spec names, never from
the spec. Logging is a side channel: its first failure warns once (the URI's secret parts scrubbed) and turns it
off for the rest of the run; the search never fails because of it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .console import warn
from .redact import scrubbed

PARAM_LIMIT = 6000  # MLflow's longest param value
TAG_LIMIT = 5000  # well under MLflow's longest tag value
TAG_PREFIX = "qas."


def flatten(config: Any, prefix: str = "") -> dict[str, str]:
    """A nested config in; {"a.b.c": value as text} out (lists stay one JSON value)."""
    if not isinstance(config, dict):
        return {prefix or "config": _text(config, PARAM_LIMIT)}
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        out.update(flatten(value, name) if isinstance(value, dict) and value else {name: _text(value, PARAM_LIMIT)})
    return out


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def run_record(settings: Any, stage: str, trial: Any) -> dict[str, Any]:
    """A finished trial in; {"name", "params", "metrics", "steps", "tags"} for its MLflow run out (pure)."""
    attrs = trial.user_attrs
    # A PRUNED trial's value is Optuna's copy of its last reported sample score, not a trial's score
    values = list(trial.values or []) if trial.state.name != "PRUNED" else []
    metrics = dict(zip(settings.objectives, values, strict=False)) if values else {}
    latency = attrs.get("latency")
    if isinstance(latency, dict) and isinstance(latency.get("median_ms"), (int, float)):
        metrics.setdefault("latency", latency["median_ms"])
    tags = {f"{TAG_PREFIX}stage": stage, f"{TAG_PREFIX}trial_number": str(trial.number),
            f"{TAG_PREFIX}state": trial.state.name, f"{TAG_PREFIX}metric": str(settings.metric or "evaluator"),
            f"{TAG_PREFIX}spec_hash": settings.spec_hash}
    keep = attrs.get("keep_float")
    if keep is not None:
        nodes = keep.get("nodes", keep) if isinstance(keep, dict) else keep
        tags[f"{TAG_PREFIX}keep_float_nodes"] = _text(nodes, TAG_LIMIT)
    for key in ("reused_from", "error", "model", "worker"):
        if key in attrs:
            tags[f"{TAG_PREFIX}{key}"] = _text(attrs[key], TAG_LIMIT)
    return {"name": f"{stage} trial {trial.number}", "params": flatten(attrs.get("config") or {}),
            "metrics": {k: float(v) for k, v in metrics.items()},
            "steps": sorted((int(s), float(v)) for s, v in (trial.intermediate_values or {}).items()), "tags": tags}


class Tracker:
    """Logs finished trials to MLflow while it works; silent when output.mlflow is unset."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.config = getattr(settings, "mlflow", None)
        self.off = self.config is None
        self.client: Any = None
        self.experiment_id: str | None = None
        self.uri = ""

    def told(self, storage: Any, trial: Any, stage: str) -> None:
        """The one hook: a trial just told to the study (its id read back from storage) is logged as a run."""
        if self.off:
            return
        try:
            self.log(stage, storage.get_trial(trial._trial_id))
        except Exception as error:  # noqa: BLE001 - tracking never fails the search
            self.off = True
            what = f"{type(error).__name__}: {error}"
            what = scrubbed(what, self.uri) if self.uri else what  # MLflow's messages may quote the URI
            warn(f"qas: MLflow logging failed and is off for the rest of this run ({what.splitlines()[0][:300]}); "
                 "the search goes on")

    def log(self, stage: str, frozen: Any) -> None:
        """One finished trial in; its run created, filled and ended in the experiment."""
        if self.client is None:
            self._connect()
        record = run_record(self.settings, stage, frozen)
        from mlflow.entities import Metric, Param, RunTag

        now = int(frozen.datetime_complete.timestamp() * 1000) if frozen.datetime_complete else 0
        run = self.client.create_run(self.experiment_id, run_name=record["name"],
                                     start_time=int(frozen.datetime_start.timestamp() * 1000)
                                     if frozen.datetime_start else None)
        run_id = run.info.run_id
        metrics = [Metric(k, v, now, 0) for k, v in record["metrics"].items()]
        metrics += [Metric("step_value", v, now, step) for step, v in record["steps"]]
        params = [Param(k, v) for k, v in record["params"].items()]
        tags = [RunTag(k, v) for k, v in record["tags"].items()]
        for start in range(0, max(len(params), len(metrics), len(tags), 1), 100):  # MLflow takes 100 params a batch
            self.client.log_batch(run_id, metrics=metrics[start:start + 100], params=params[start:start + 100],
                                  tags=tags[start:start + 100])
        self.client.set_terminated(run_id, "FINISHED" if frozen.state.name == "COMPLETE" else "FAILED", end_time=now
                                   or None)

    def _connect(self) -> None:
        env = self.config["env"]
        self.uri = os.environ.get(env, "")
        if not self.uri:
            raise RuntimeError(f"output.mlflow: ${env} is not set; set it to the tracking URI")
        # a tracking server that is down would otherwise hold the first trial for minutes of MLflow's retries
        # (7, backing off, 120 s each); the user's own settings of these win
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.uri)
        name = self.config["experiment"]
        found = self.client.get_experiment_by_name(name)
        self.experiment_id = found.experiment_id if found is not None else self.client.create_experiment(name)
