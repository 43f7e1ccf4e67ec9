"""`qas status`, `qas report` and the script on the session's real PostgreSQL server (conftest's `postgres`): a wrong
password or a missing database said in words, the same way by all three and never with the password; a worker
elsewhere judged alive or gone by its heartbeat's age."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.back.emit import write_atomically
from compiler.commands.pipeline import compile_spec
from compiler.report import build_report
from compiler.report.status import status_text
from compiler.runtime.search import Search

from .conftest import Postgres, qas, settings_from_script

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
optuna.logging.set_verbosity(optuna.logging.WARNING)
ENV = "QAS_STATUS_TEST_URL"
USER, PASSWORD, WRONG = "secretive", "right-pw-7f3a", "zq-pw-91c2"


def compiled(example: Path) -> tuple[Path, Any]:
    """The example with its study in the database named by $ENV (heartbeat 1 s, grace 2 s), compiled."""
    spec = example / "spec.yaml"
    spec.write_text(spec.read_text() + f"storage:\n  url_env: {ENV}\n  heartbeat: 1\n  grace_period: 2\n")
    result = compile_spec(spec)
    assert result.ok and not write_atomically(result.files, result.out_dir), result.diagnostics
    script = result.out_dir / result.plan.script
    return result.out_dir, settings_from_script(script.read_text(), script)


def password_role(postgres: Postgres) -> str:
    """A role that must give its password (scram) from 127.0.0.1, on the server whose others are trusted; its URL
    without the password, as USER@HOST:PORT/DATABASE."""
    import psycopg

    hba = postgres.data / "pg_hba.conf"
    rule = f"host all {USER} 127.0.0.1/32 scram-sha-256\n"
    if rule not in hba.read_text():
        hba.write_text(rule + hba.read_text())  # the first matching line wins: before the trust lines
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="postgres", dbname="postgres",
                             autocommit=True) as db:
            db.execute(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
            db.execute(f"CREATE DATABASE {USER}_db OWNER {USER}")  # its own, where it may create Optuna's tables
        postgres._run("pg_ctl", "reload", "-D", str(postgres.data))
        time.sleep(1)  # the server rereads pg_hba.conf on the signal
    return f"{USER}@127.0.0.1:{postgres.port}/{USER}_db"


@pytest.mark.parametrize("fault", ["wrong password", "missing database"])
def test_status_report_and_the_script_say_what_is_wrong_with_the_database(example_copy: Path, postgres: Postgres,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       fault: str) -> None:
    out, _ = compiled(example_copy)
    if fault == "wrong password":
        where = password_role(postgres)
        url = f"postgresql+psycopg://{where.replace('@', f':{WRONG}@', 1)}"
        expected = f'the password (or user) is wrong: password authentication failed for user "{USER}"'
    else:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{postgres.port}/no_such_db"
        expected = 'database "no_such_db" does not exist on that server; create it (createdb)'
    monkeypatch.setenv(ENV, url)
    said = {}
    for command in ("status", "report"):
        done = qas(command, str(out))
        assert done.returncode != 0, done.stdout
        said[command] = done.stderr
    ran = subprocess.run([sys.executable, str(out / "tinycnn_autosearch.py")], capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 2
    said["script"] = ran.stderr
    for who, text in said.items():
        assert expected in text, f"{who}: {text}"
        assert "cannot open the study storage postgresql+psycopg://" in text and f"(from ${ENV})" in text, who
        assert "An exception is raised during the commit" not in text and "Traceback" not in text, who
        assert WRONG not in text and PASSWORD not in text, who


def test_the_right_password_opens_the_study(example_copy: Path, postgres: Postgres,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out, settings = compiled(example_copy)
    where = password_role(postgres)
    monkeypatch.setenv(ENV, f"postgresql+psycopg://{where.replace('@', f':{PASSWORD}@', 1)}")
    Search(settings)
    assert not isinstance(build_report(out), str)


def test_a_worker_elsewhere_is_alive_while_it_beats_and_gone_after_the_grace_period(
        example_copy: Path, postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    out, settings = compiled(example_copy)
    monkeypatch.setenv(ENV, postgres.new_database())
    search = Search(settings)
    elsewhere = "0@another-machine:4242"  # no process here to look at: only its heartbeat tells
    _, trial, _ = search.slots.claim(elsewhere)
    search.storage.record_heartbeat(trial._trial_id)
    text = status_text(build_report(out))
    assert f"{elsewhere}: 0 complete; running grid trial {trial.number}" in text and "GONE" not in text
    time.sleep(4)  # no heartbeat for longer than the grace period (2 s)
    report = build_report(out)
    text = status_text(report)
    assert f"{elsewhere}: 0 complete; GONE (no heartbeat for " in text and "(grace period 2 s)" in text, text
    assert f"grid trial {trial.number} left RUNNING" in text and "running grid trial" not in text
    assert report["state"] == "not running"
