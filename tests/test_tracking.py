"""output.mlflow without amd-quark: the fake quantizer's search logs each finished trial (complete, failed, answered
from the study) as one MLflow run in a local file store, read back with MLflow's client; a tracking failure warns
once and never fails the search; the compile side (requirement, schema, variable-name rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.commands.pipeline import compile_spec
from compiler.runtime import tracking
from compiler.runtime.space import stage_configs

from .conftest import EXAMPLE_DIR, GOLDEN, FakeQuark, fake_settings, product_configs, target_env

mlflow = pytest.importorskip("mlflow")
optuna.logging.set_verbosity(optuna.logging.WARNING)
ENV = "QAS_TEST_MLFLOW_URI"


def runs(uri: str, experiment: str) -> list[Any]:
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment!r} in {uri}"
    return client.search_runs([found.experiment_id], max_results=1000)


def search_with(s: Any, fake: FakeQuark) -> Any:
    from compiler.runtime.search import Search

    search = Search(s)
    search.attach(fake.quantize, fake.score)
    search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs))
    return search


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv(ENV, uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store in maintenance mode
    return uri


def test_each_finished_trial_is_one_run_with_its_config_values_stage_and_state(tmp_path: Path, store: str) -> None:
    s = fake_settings(tmp_path, mlflow={"env": ENV, "experiment": "fake search"})
    fake = FakeQuark(fail_when=lambda config: config["activation"] == "Int16Spec" and config["cle_algo"] is None)
    search = search_with(s, fake)
    finished = [(stage, t) for stage, study in (("grid", search.grid_study), ("sampler", search.sampler_study))
                for t in study.get_trials(deepcopy=False) if t.state.name in ("COMPLETE", "FAIL")]
    logged = runs(store, "fake search")
    assert len(logged) == len(finished) >= s.grid_configs
    by_name = {r.info.run_name: r for r in logged}
    for stage, t in finished:
        run = by_name[f"{stage} trial {t.number}"]
        assert run.data.tags["qas.stage"] == stage and run.data.tags["qas.trial_number"] == str(t.number)
        assert run.data.tags["qas.state"] == t.state.name
        assert run.info.status == ("FINISHED" if t.state.name == "COMPLETE" else "FAILED")
        config = t.user_attrs["config"]
        assert run.data.params["activation"] == config["activation"]  # flattened: nested keys joined by dots
        if t.state.name == "COMPLETE":
            assert run.data.metrics["accuracy"] == pytest.approx(t.value)
        else:
            assert "quantizer exploded" in run.data.tags["qas.error"] and "accuracy" not in run.data.metrics
    assert any(t.state.name == "FAIL" for _, t in finished)  # the failing configuration was met and logged


def test_a_broken_tracking_uri_warns_once_and_the_search_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a file, not a folder"
    blocker.write_text("x")
    monkeypatch.setenv(ENV, (blocker / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    s = fake_settings(tmp_path, mlflow={"env": ENV, "experiment": "x"})
    search = search_with(s, FakeQuark())
    assert len(search.complete(search.sampler_study)) == s.n_trials  # the search ran to its budget
    err = capsys.readouterr().err
    assert err.count("MLflow logging failed") == 1 and "the search goes on" in err


def test_an_unset_variable_warns_once_and_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ENV, raising=False)
    search = search_with(fake_settings(tmp_path, mlflow={"env": ENV, "experiment": "x"}), FakeQuark())
    assert search.complete(search.sampler_study)
    err = capsys.readouterr().err
    assert err.count("MLflow logging failed") == 1 and f"${ENV} is not set" in err


def test_without_output_mlflow_nothing_is_imported_or_logged(tmp_path: Path) -> None:
    tracker = tracking.Tracker(fake_settings(tmp_path))
    assert tracker.off
    tracker.told(None, None, "grid")  # a no-op: never touches the storage or the trial


def test_flatten_joins_nested_keys_and_keeps_lists_whole() -> None:
    config = {"activation": "Int8Spec", "adaround_params": {"num_iterations": 20, "lr": 0.1}, "blocks": ["a", "b"],
              "empty": {}}
    assert tracking.flatten(config) == {"activation": "Int8Spec", "adaround_params.num_iterations": "20",
                                        "adaround_params.lr": "0.1", "blocks": '["a", "b"]', "empty": "{}"}


def test_kept_in_float_nodes_and_steps_go_into_the_record(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, objectives=["accuracy", "latency", "size"], two_stage=False)
    made = optuna.trial.create_trial(
        values=[0.01, 2.5, 1000.0], user_attrs={"config": {"keep_float": 2}, "keep_float": {
            "choice": 2, "groups": ["g"], "nodes": ["conv1", "conv2"]}}, intermediate_values={0: 0.5, 3: 0.2})
    record = tracking.run_record(s, "sampler", made)
    assert record["metrics"] == {"accuracy": 0.01, "latency": 2.5, "size": 1000.0}
    assert record["tags"]["qas.keep_float_nodes"] == '["conv1", "conv2"]'
    assert record["steps"] == [(0, 0.5), (3, 0.2)] and record["params"] == {"keep_float": "2"}


def test_compile_requires_mlflow_only_with_output_mlflow(tmp_path: Path) -> None:
    spec = GOLDEN / "mlflow_tracking" / "spec.yaml"
    result = compile_spec(spec, target_env(GOLDEN / "mlflow_tracking"))
    assert result.ok, result.diagnostics
    assert result.plan.settings.requirements["mlflow-skinny"] == ">=3.1,<4"
    assert result.plan.settings.mlflow == {"env": "QAS_MLFLOW_URI", "experiment": "tinycnn quantization"}
    plain = compile_spec(EXAMPLE_DIR / "spec.yaml", target_env(GOLDEN))
    assert plain.ok and "mlflow-skinny" not in plain.plan.settings.requirements and plain.plan.settings.mlflow is None
    script = next(text for name, text in plain.files.items() if name.endswith("_autosearch.py"))
    assert "mlflow=" not in script  # a spec without tracking compiles to the script it always did


def test_a_uri_in_place_of_the_variable_name_is_refused_and_never_echoed_with_its_password(tmp_path: Path) -> None:
    from .conftest import qas

    spec = tmp_path / "spec.yaml"
    base = (GOLDEN / "mlflow_tracking" / "spec.yaml").read_text().replace("../../specs/example", str(EXAMPLE_DIR))
    for uri, code in (("http://mlflow.example.com:5000", "QAS205"),
                      ("https://me:hunter2@mlflow.example.com", "QAS336")):
        spec.write_text(base.replace("tracking_uri_env: QAS_MLFLOW_URI", f'tracking_uri_env: "{uri}"'))
        done = qas("compile", str(spec))
        assert done.returncode != 0 and f"error[{code}]" in done.stderr, done.stderr
        assert "hunter2" not in done.stderr and not (tmp_path / "autosearch_output").exists()
