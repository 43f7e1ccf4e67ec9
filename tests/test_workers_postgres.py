"""Workers on a real PostgreSQL server (the session's `postgres` fixture), without amd-quark: the budget exact across
worker processes, a worker on another machine that stops sending heartbeats has its trial failed and queued again,
the slot lock is PostgreSQL's advisory lock, and a worker that loses the database retries, then stops saying so."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.runtime import contract, storage
from compiler.runtime.search import Search
from compiler.runtime.space import stage_configs

from .conftest import FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)
ENV = "QAS_TEST_STORAGE_URL"


def url_settings(folder: Path, **changes: Any) -> Any:
    kind = {"kind": "url", "env": ENV, "artifacts": None, "heartbeat": 1.0, "grace": 3.0}
    return fake_settings(folder, study_db="fake_study", storage=kind | changes.pop("storage", {}), **changes)


def worker(folder: str, url: str, index: int, changes: dict[str, Any]) -> None:
    """One worker process on the database at `url`, logging each quantization to folder/quantized.log."""
    import os

    os.environ[ENV] = url
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settings = url_settings(Path(folder), **changes)
    search = Search(settings, worker_index=index, joining=True)
    fake = FakeQuark()

    def quantize(config: dict[str, Any], output: Path) -> None:
        time.sleep(0.05)
        fake.quantize(config, output)
        with open(Path(folder) / "quantized.log", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(config, sort_keys=True) + "\n")

    search.attach(quantize, fake.score)
    search.run(stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                             product_configs))


@pytest.mark.e2e
def test_three_workers_on_postgresql_complete_the_budget_exactly(tmp_path: Path, postgres: Any,
                                                                 monkeypatch: Any) -> None:
    url = postgres.new_database()
    monkeypatch.setenv(ENV, url)
    changes = {"n_trials": 8}
    Search(url_settings(tmp_path, **changes))
    processes = [multiprocessing.get_context("spawn").Process(target=worker, args=(str(tmp_path), url, k, changes))
                 for k in range(3)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(180)
        assert p.exitcode == 0
    search = Search(url_settings(tmp_path, **changes))
    grid = [t for t in search.grid_study.get_trials() if t.state.name == "COMPLETE"]
    sampled = [t for t in search.sampler_study.get_trials() if t.state.name == "COMPLETE"]
    assert sorted(t.user_attrs[contract.ATTR_GRID_INDEX] for t in grid) == list(range(6)) and len(sampled) == 8
    assert not search.trials("RUNNING") and not search.trials("WAITING")
    quantized = Counter((tmp_path / "quantized.log").read_text().splitlines())
    assert max(quantized.values()) == 1
    assert len({t.user_attrs[contract.ATTR_WORKER] for t in grid + sampled}) >= 2


def test_a_worker_elsewhere_that_stops_sending_heartbeats_has_its_trial_failed_and_queued_again(
        tmp_path: Path, postgres: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv(ENV, postgres.new_database())
    settings = url_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=2)
    search = Search(settings)
    study, trial, _stage = search.slots.claim("0@another-machine:4242")  # a worker this host cannot see
    trial.suggest_categorical("activation", ["Int8Spec"])
    search.storage.record_heartbeat(trial._trial_id)  # its last sign of life
    search.top_up()
    assert study.trials[trial.number].state.name == "RUNNING"  # within the grace period: alive as far as we know
    time.sleep(settings.storage["grace"] + 1.5)
    search.top_up()
    failed = study.trials[trial.number]
    assert failed.state.name == "FAIL" and failed.user_attrs[contract.ATTR_INTERRUPTED]
    assert "stopped sending heartbeats" in failed.user_attrs[contract.ATTR_ERROR] and search.failures() == 0
    queued = [t for t in study.trials if t.user_attrs.get(contract.ATTR_RETRIED_FROM) == trial.number]
    assert len(queued) == 1 and queued[0].state.name == "WAITING"
    assert queued[0].system_attrs["fixed_params"] == {"activation": "Int8Spec"}  # the same configuration again
    live = [t for t in study.trials if t.state.name in ("WAITING", "RUNNING", "COMPLETE")]
    assert len(live) == 2  # counted once in the budget


def test_the_slot_lock_is_a_postgresql_advisory_lock_that_excludes_another_worker(tmp_path: Path, postgres: Any,
                                                                                   monkeypatch: Any) -> None:
    from sqlalchemy import create_engine, text

    url = postgres.new_database()
    monkeypatch.setenv(ENV, url)
    search = Search(url_settings(tmp_path))
    other = create_engine(url)
    with search.slots.lock(), other.connect() as connection:
        held = connection.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")).scalar()
        assert held == 1
    with other.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")).scalar() == 0
    other.dispose()


def test_a_worker_that_loses_the_database_retries_then_stops_saying_so(tmp_path: Path, postgres: Any,
                                                                       monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setenv(ENV, postgres.new_database())
    monkeypatch.setattr(storage, "STORAGE_RETRIES", (0.2, 0.2))
    monkeypatch.setattr("compiler.runtime.search.STORAGE_RETRIES", (0.2, 0.2))
    search = Search(url_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=3))
    fake = FakeQuark()

    def quantize(config: dict[str, Any], output: Path) -> None:
        if fake.quantized:
            postgres.stop()  # the database goes away during the second trial
        fake.quantize(config, output)

    search.attach(quantize, fake.score)
    try:
        with pytest.raises(SystemExit) as stop:
            search.run([])
    finally:
        postgres.start()
    assert stop.value.code == contract.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("the study storage did not answer") == 2 and "lost the study storage" in err
    assert "Traceback" not in err
    # the database is back: the trial in hand when it went is queued again, and a restart finishes the budget
    again = Search(url_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=3))
    again.attach(FakeQuark().quantize, fake.score)
    assert again.run([]) is None and again.budget_reached()
    assert not again.trials("RUNNING")


def test_a_storage_url_that_is_not_set_or_not_postgresql_stops_with_the_fix(tmp_path: Path, monkeypatch: Any,
                                                                              capsys: Any) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(SystemExit):
        Search(url_settings(tmp_path))
    assert f"${ENV} is not set" in capsys.readouterr().err
    monkeypatch.setenv(ENV, "mysql://u:secret@h/db")
    with pytest.raises(SystemExit):
        Search(url_settings(tmp_path))
    err = capsys.readouterr().err
    assert "is not a PostgreSQL URL" in err and "secret" not in err


def paused_worker(folder: str, url: str) -> None:
    """A worker whose first quantization says it started (folder/started) and waits for folder/go, its qas lines in
    folder/worker.out: the test pauses it there with SIGSTOP."""
    import os
    import sys

    os.environ[ENV] = url
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sys.stdout = sys.stderr = open(Path(folder) / "worker.out", "a", encoding="utf-8", buffering=1)  # noqa: SIM115
    settings = url_settings(Path(folder), two_stage=False, grid_configs=0, n_trials=1)
    search = Search(settings, worker_index=0, joining=True)
    fake = FakeQuark()

    def quantize(config: dict[str, Any], output: Path) -> None:
        if not fake.quantized:
            (Path(folder) / "started").write_text("")
            while not (Path(folder) / "go").exists():
                time.sleep(0.05)
        fake.quantize(config, output)

    search.attach(quantize, fake.score)
    code = search.run([])
    sys.exit(0 if code is None else code)


def test_a_worker_paused_past_the_grace_period_drops_its_late_result_with_one_line_and_goes_on(
        tmp_path: Path, postgres: Any, monkeypatch: Any) -> None:
    import os
    import signal

    url = postgres.new_database()
    monkeypatch.setenv(ENV, url)
    settings = url_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=1)
    Search(settings)
    process = multiprocessing.get_context("spawn").Process(target=paused_worker, args=(str(tmp_path), url))
    process.start()
    deadline = time.monotonic() + 120
    while not (tmp_path / "started").exists():
        assert process.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGSTOP)  # paused mid-trial: no heartbeat goes out
    try:
        time.sleep(settings.storage["grace"] + 2.5)
        other = Search(settings, worker_index=1, joining=True)
        other.top_up()  # the paused worker's trial is failed as interrupted and queued again
        (taken,) = other.trials("FAIL")
        assert taken.user_attrs[contract.ATTR_INTERRUPTED] and "stopped sending heartbeats" in taken.user_attrs[
            contract.ATTR_ERROR]
        (tmp_path / "go").write_text("")
    finally:
        os.kill(process.pid, signal.SIGCONT)
    process.join(180)
    out = (tmp_path / "worker.out").read_text()
    assert process.exitcode == 0, out
    assert out.count("was taken back by another worker while this one was paused") == 1, out
    assert "Traceback" not in out and "Cannot tell" not in out
    again = Search(settings, worker_index=1, joining=True)  # it went on: the queued retry is complete
    assert [t.state.name for t in again.sampler_study.get_trials()] == ["FAIL", "COMPLETE"]
    assert again.budget_reached() and not (tmp_path / f"quantized_model_sampler_{taken.number}.onnx").exists()
