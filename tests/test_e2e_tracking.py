"""output.mlflow end to end with the real amd-quark on CPU: the example search, tracked into a local MLflow file
store through the variable the spec names, logs each finished trial of both stages as one run (its configuration as
params, its value as a metric, stage, trial number and state as tags), read back with MLflow's client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import needs_quark, qas, study_storage

pytestmark = [pytest.mark.e2e, needs_quark]
mlflow = pytest.importorskip("mlflow")
ENV = "QAS_E2E_MLFLOW_URI"


def flat(config: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else key
        out.update(flat(value, name) if isinstance(value, dict) and value else {name: value})
    return out


def test_the_example_search_logs_each_trial_as_an_mlflow_run(example_copy: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv(ENV, uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store in maintenance mode
    spec = example_copy / "spec.yaml"
    spec.write_text(spec.read_text() + f"  mlflow: {{tracking_uri_env: {ENV}, experiment: tinycnn e2e}}\n")
    ran = qas("run", str(spec), "--yes", timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "MLflow logging failed" not in ran.stderr
    out = example_copy / "autosearch_output"
    storage = study_storage(next(out.glob("*_study.journal")))
    finished = {}
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        for t in study.get_trials(deepcopy=False):
            if t.state.name in ("COMPLETE", "FAIL"):
                finished[(t.user_attrs["stage"], t.number)] = t
    assert {stage for stage, _ in finished} == {"grid", "sampler"}  # both stages of the example ran

    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("tinycnn e2e")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    logged = {(r.data.tags["qas.stage"], int(r.data.tags["qas.trial_number"])): r for r in runs}
    assert sorted(logged) == sorted(finished) and len(runs) == len(finished)  # one run a finished trial
    for key, trial in finished.items():
        run = logged[key]
        assert run.info.run_name == f"{key[0]} trial {key[1]}"
        assert run.data.tags["qas.state"] == trial.state.name and run.data.tags["qas.metric"] == "L2"
        assert run.data.params == {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                                   for k, v in flat(trial.user_attrs["config"]).items()}  # the config, flattened
        if trial.state.name == "COMPLETE":
            assert run.info.status == "FINISHED" and run.data.metrics["accuracy"] == pytest.approx(trial.value)
