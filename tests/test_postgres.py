"""The session's real PostgreSQL server (conftest's `postgres` fixture) under an Optuna RDBStorage, as the distributed
search's workers share it: concurrent workers, heartbeats and stale trials, advisory locks, and losing the server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import optuna
import pytest
import sqlalchemy

from .conftest import Postgres

# heartbeats and fail_stale_trials are experimental in Optuna and say so at every use
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
optuna.logging.set_verbosity(optuna.logging.WARNING)

HEARTBEAT, GRACE = 1, 3  # seconds: a trial whose worker is silent for GRACE seconds is stale


def storage(url: str) -> optuna.storages.RDBStorage:
    return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT, grace_period=GRACE)


def worker(code: str, *args: str) -> subprocess.Popen:
    """A separate Python process (another machine's worker, as far as the database can tell) running code."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


ASK_AND_TELL = """
    import os, sys, time
    import optuna
    url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    study = optuna.load_study(study_name=name, storage=url)  # ask/tell: no heartbeat (that comes with optimize)
    for _ in range(count):
        trial = study.ask()
        trial.set_user_attr("worker", name + ":" + str(os.getpid()))
        x = trial.suggest_float("x", -1, 1)
        time.sleep(0.05)  # long enough that the two workers' trials interleave
        study.tell(trial, x * x)
"""


def test_each_new_database_is_a_fresh_empty_one(postgres: Postgres) -> None:
    first, second = postgres.new_database(), postgres.new_database()
    assert first != second and postgres.url not in (first, second)
    optuna.create_study(study_name="only-here", storage=storage(first))
    assert [s.study_name for s in optuna.get_all_study_summaries(storage(first))] == ["only-here"]
    assert optuna.get_all_study_summaries(storage(second)) == []


@pytest.mark.e2e  # two Python processes importing Optuna: a few seconds
def test_two_worker_processes_record_every_trial(postgres: Postgres) -> None:
    url = postgres.new_database()
    study = optuna.create_study(study_name="shared", storage=url)
    per_worker = 10
    workers = [worker(ASK_AND_TELL, url, "shared", str(per_worker)) for _ in range(2)]
    for proc in workers:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 2 * per_worker
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert sorted(t.number for t in trials) == list(range(2 * per_worker))  # no number handed out twice
    by_worker: dict[str, list[optuna.trial.FrozenTrial]] = {}
    for t in trials:
        by_worker.setdefault(t.user_attrs["worker"], []).append(t)
    assert sorted(map(len, by_worker.values())) == [per_worker, per_worker]
    # they really ran at the same time: each worker's span of trials overlaps the other's
    (a_start, a_end), (b_start, b_end) = [(min(t.datetime_start for t in ts), max(t.datetime_complete for t in ts))
                                          for ts in by_worker.values()]
    assert a_start < b_end and b_start < a_end, "the workers ran one after the other, not concurrently"


HANGS_IN_A_TRIAL = """
    import sys, time
    import optuna
    url, name, heartbeat, grace = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    storage = optuna.storages.RDBStorage(url, heartbeat_interval=heartbeat, grace_period=grace)
    study = optuna.load_study(study_name=name, storage=storage)
    def objective(trial):
        print("running", trial.number, flush=True)
        time.sleep(600)
        return 0.0
    study.optimize(objective, n_trials=1)
"""


@pytest.mark.e2e  # waits out the grace period: about 8 s
def test_a_killed_workers_running_trial_fails_after_the_grace_period(postgres: Postgres) -> None:
    url = postgres.new_database()
    study = optuna.create_study(study_name="stale", storage=storage(url))
    proc = worker(HANGS_IN_A_TRIAL, url, "stale", str(HEARTBEAT), str(GRACE))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the trial is RUNNING and its heartbeat thread has started
        assert line.startswith("running"), line + proc.stderr.read() if proc.stderr else line
        time.sleep(HEARTBEAT + 0.5)  # a heartbeat or two recorded
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    killed_at = time.monotonic()
    (trial,) = study.get_trials(deepcopy=False)
    assert trial.state == optuna.trial.TrialState.RUNNING
    optuna.storages.fail_stale_trials(study)  # within the grace period: left alone
    assert study.get_trials(deepcopy=False)[0].state == optuna.trial.TrialState.RUNNING
    time.sleep(max(0.0, GRACE + 1.0 - (time.monotonic() - killed_at)))
    optuna.storages.fail_stale_trials(study)
    assert study.get_trials(deepcopy=False)[0].state == optuna.trial.TrialState.FAIL


def test_an_advisory_lock_excludes_a_second_connection_until_released(postgres: Postgres) -> None:
    engine = sqlalchemy.create_engine(postgres.url)
    key = 424242
    acquired = threading.Event()

    def wait_for_the_lock() -> None:
        with engine.connect() as other:
            other.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            acquired.set()
            other.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})

    try:
        with engine.connect() as holder, engine.connect() as other:
            holder.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            assert other.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar() is False
            waiter = threading.Thread(target=wait_for_the_lock, daemon=True)
            waiter.start()
            assert not acquired.wait(1.0), "a second connection took a lock the first one holds"
            assert holder.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key}).scalar() is True
            assert acquired.wait(10), "the waiting connection did not get the lock once it was released"
            waiter.join(10)
            assert other.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar() is True
    finally:
        engine.dispose()


def error_chain(error: BaseException | None) -> list[str]:
    """An exception and its causes, outermost first, as module.Class names."""
    chain = []
    while error is not None:
        chain.append(f"{type(error).__module__}.{type(error).__qualname__}")
        error = error.__cause__ or error.__context__
    return chain


# What a storage call raises once the server is gone: the runtime treats these as "lost the database". Optuna wraps
# every SQLAlchemy error of a storage session in StorageInternalError (with a message about invalid data, whatever the
# cause), so the cause is what tells a lost server from a bad write; building a new RDBStorage is not wrapped.
LOST_IN_A_CALL = ["optuna.exceptions.StorageInternalError", "sqlalchemy.exc.OperationalError",
                  "psycopg.OperationalError"]
LOST_IN_A_NEW_STORAGE = ["sqlalchemy.exc.OperationalError", "psycopg.OperationalError"]


def test_a_stopped_server_makes_storage_calls_raise_and_a_restarted_one_serves_again(postgres: Postgres) -> None:
    url = postgres.new_database()
    # no heartbeat here: a trial from ask() gets none (Optuna warns: heartbeats come with Study.optimize)
    study = optuna.create_study(study_name="survives", storage=optuna.storages.RDBStorage(url))
    held = study.ask()
    postgres.stop()
    try:
        with pytest.raises(Exception) as in_a_call:
            study.ask()
        with pytest.raises(Exception) as in_a_new_storage:
            optuna.storages.RDBStorage(url)
    finally:
        postgres.start()
    assert error_chain(in_a_call.value) == LOST_IN_A_CALL, in_a_call.value
    assert error_chain(in_a_new_storage.value) == LOST_IN_A_NEW_STORAGE, in_a_new_storage.value
    study.tell(held, 1.0)  # the old storage's pool reconnects to the restarted server (pool_pre_ping)
    (trial,) = optuna.load_study(study_name="survives", storage=storage(url)).get_trials(deepcopy=False)
    assert (trial.state, trial.value) == (optuna.trial.TrialState.COMPLETE, 1.0)
