"""No database password in any output: whatever an environment variable holds (a URL of any shape, a libpq or ODBC
connection string, a password in the query, a password holding '@' or '{'), the script's messages, its log and its
files, `qas status` and `qas report`, and every compile message, show the password nowhere (runtime/redact.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compiler.runtime import storage
from compiler.runtime.checks import SearchError

from .conftest import GOLDEN, free_port, qas

ENV = "QAS_TEST_SECRET_URL"
# Passwords as users write them, unencoded: '@', ':', '/', '?', '#', '%', '{', '}' and '=' included.
PASSWORDS = st.text(alphabet="abcdefXYZ0123456789@:/?#%{}=!*-_.~$", min_size=8, max_size=20).filter(
    lambda p: sum(c.isalnum() for c in p) >= 4)
SHAPES = (
    "postgresql://optuna:{p}@db.example.com:5432/studies",
    "postgresql+psycopg://optuna:{p}@db.example.com/studies",
    "postgresql+psycopg2://optuna:{q}@db.example.com/studies",
    "postgresql://:{p}@db.example.com/studies",
    "postgresql://optuna@db.example.com/studies?password={p}&sslmode=require",
    "postgresql://optuna:{p}@db.example.com:notaport/studies",
    "postgresql://optuna:{p}@db1.example.com:5432,db2.example.com:5433/studies",
    "postgres://optuna:{p}@db.example.com/studies",
    "mysql://optuna:{p}@db.example.com/studies",
    "sqlite:///studies.db?password={p}",
    "https://optuna:{p}@db.example.com/studies",
    "host=db.example.com port=5432 dbname=studies user=optuna password={p}",
    "Server=db.example.com;Database=studies;User Id=optuna;Password={p};",
    "optuna:{p}@db.example.com/studies",
    "{p}",
    "  postgresql://optuna:{p}@db.example.com/studies  ",
)
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def shapes(password: str) -> list[str]:
    return [s.format(p=password, q=quote(password, safe="")) for s in SHAPES]


def assert_hidden(text: str, password: str) -> None:
    for form in {password, quote(password, safe=""), quote(password)}:
        assert form not in text, f"password {password!r} shown in: {text!r}"


def stop_message(capsys: pytest.CaptureFixture[str], call) -> str:
    """What a runtime call that must stop (SearchError) printed."""
    capsys.readouterr()
    with pytest.raises(SearchError):
        call()
    captured = capsys.readouterr()
    return captured.out + captured.err


@FUZZ
@given(password=PASSWORDS)
@example(password="pa@ss@word{secret}")
@example(password="hunter2:hunter2@x")
def test_no_url_shape_ever_shows_its_password(password: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from compiler.runtime.redact import scrubbed, shown_url

    for url in shapes(password):
        assert_hidden(shown_url(url), password)
        assert_hidden(scrubbed(f"connection to {url} failed: {password} rejected", url), password)
        monkeypatch.setenv(ENV, url)
        try:
            found = storage.storage_url(ENV)
        except SearchError:
            continue
        finally:
            assert_hidden("".join(capsys.readouterr()), password)
        assert_hidden(storage.shown(found), password)


def test_a_url_that_is_not_postgresql_is_described_not_quoted(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # before: "it starts 'mysql://opt'" or, for a connection string, its first 12 characters
    for url, says in (("mysql://optuna:hunter2@db/x", "mysql://optuna:***@db/x"),
                      ("host=db password=hunter2", "key=value connection string"),
                      ("hunter2@db", "not a URL")):
        monkeypatch.setenv(ENV, url)
        message = stop_message(capsys, lambda: storage.storage_url(ENV))
        assert "is not a PostgreSQL URL" in message and says in message and "hunter2" not in message


def test_a_password_in_the_query_string_is_masked() -> None:
    shown_url = storage.shown
    assert (shown_url("postgresql+psycopg://optuna@db:5432/studies?password=hunter2&sslmode=require")
            == "postgresql+psycopg://optuna@db:5432/studies?password=***&sslmode=require")
    assert shown_url("postgresql+psycopg://optuna:hunter2@db:5432/studies") == "postgresql+psycopg://optuna:***@db:5432/studies"


@pytest.mark.parametrize("shape", ["postgresql+psycopg://optuna:{p}@127.0.0.1:{port}/studies",
                                   "postgresql+psycopg://optuna:pa@{p}@127.0.0.1:{port}/studies",
                                   "postgresql+psycopg://optuna@127.0.0.1:{port}/studies?password={p}",
                                   "postgresql+psycopg://optuna:{{{p}}}@127.0.0.1:{port}/studies"])
def test_a_storage_that_cannot_be_opened_never_shows_the_password(shape: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    password = "s3cretWord"
    monkeypatch.setenv(ENV, shape.format(p=password, port=free_port()))  # nothing listens there
    message = stop_message(capsys, lambda: storage.open_storage("url", tmp_path / "x_study", ENV))
    assert "cannot open the study storage" in message
    assert_hidden(message, password)


def test_a_wrong_database_on_a_real_server_is_named_without_the_password(tmp_path: Path, postgres,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    password = "s3cretWord"
    for url in (f"postgresql+psycopg://postgres:{password}@127.0.0.1:{postgres.port}/no_such_database",
                f"postgresql+psycopg://postgres:ab@{password}@127.0.0.1:{postgres.port}/no_such_database"):
        monkeypatch.setenv(ENV, url)
        message = stop_message(capsys, lambda: storage.open_storage("url", tmp_path / "x_study", ENV))
        assert "cannot open the study storage" in message
        assert_hidden(message, password)


@pytest.fixture(scope="module")
def compiled_url_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's search with its study in the database of $QAS_STORAGE_URL, compiled into a temp folder."""
    example = GOLDEN.parent / "specs" / "example"
    folder = tmp_path_factory.mktemp("url_search")
    spec = folder / "spec.yaml"
    spec.write_text(f"qas: 1\nname: shared\nmodel: {example / 'models' / 'tinycnn.onnx'}\ncalibration:\n"
                    f"  folder: {example / 'data' / 'calib'}\n  limit: 8\ndevice: cpu\n"
                    "search: {preset: XINT8_SEARCH, n_trials: 1}\nstorage: {url_env: QAS_STORAGE_URL}\n",
                    encoding="utf-8")
    compiled = qas("compile", str(spec))
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    return folder / "autosearch_output"


@pytest.mark.parametrize("url", ["mysql://optuna:s3cretWord@db.example.com/studies",
                                 "host=127.0.0.1 dbname=studies user=optuna password=s3cretWord",
                                 "postgresql+psycopg://optuna@127.0.0.1:{port}/studies?password=s3cretWord",
                                 "postgresql+psycopg://optuna:pa@s3cretWord@127.0.0.1:{port}/studies"])
def test_the_script_status_and_report_never_show_the_password(url: str, compiled_url_search: Path) -> None:
    import os

    env = os.environ | {"QAS_STORAGE_URL": url.format(port=free_port())}
    script = next(compiled_url_search.glob("*_autosearch.py"))
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                         cwd=compiled_url_search)
    assert ran.returncode != 0 and "Traceback" not in ran.stderr
    shown = ran.stdout + ran.stderr
    assert "PostgreSQL URL" in shown or "cannot open the study storage" in shown, shown  # got as far as the storage
    for command in ("status", "report"):
        checked = subprocess.run([sys.executable, "-m", "compiler", command, str(compiled_url_search)],
                                 capture_output=True, text=True, env=env, timeout=300)
        assert "Traceback" not in checked.stderr
        shown += checked.stdout + checked.stderr
    for path in compiled_url_search.rglob("*"):
        if path.is_file():
            shown += path.read_text(encoding="utf-8", errors="replace")
    assert "s3cretWord" not in shown


def test_compile_messages_never_repeat_a_secret(tmp_path: Path) -> None:
    """A key that holds a URL, a duplicate such key, and a value with a NUL byte as well: QAS330 says where, never
    what."""
    cases = {"key": 'calibration: {reader: r.py:R, args: {"postgresql://u:s3cretWord@h/db": 1}}\n',
             "duplicate": '"postgresql://u:s3cretWord@h/db": 1\n"postgresql://u:s3cretWord@h/db": 2\n',
             "nul": 'output: {dir: "a\\0postgresql://u:s3cretWord@h/db"}\n',
             "unknown": 'output: {dri: "https://u:s3cretWord@h/x"}\n'}
    for name, body in cases.items():
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(f"qas: 1\nname: t\n{body}", encoding="utf-8")
        for fmt in ("text", "json"):
            ran = qas("compile", str(spec), "--format", fmt, "--target-env", str(GOLDEN / "target_env.json"))
            assert ran.returncode == 1, (name, ran.stdout, ran.stderr)
            assert "s3cretWord" not in ran.stdout + ran.stderr, (name, ran.stdout + ran.stderr)


def test_an_unexpected_error_that_quotes_the_url_shows_no_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The script's last resort (a bug or a database error mid-search): message and traceback, without the password."""
    import types

    from compiler.runtime import launch

    from .conftest import fake_settings

    url = "postgresql+psycopg://optuna:s3cretWord@db.example.com/studies"
    monkeypatch.setenv(ENV, url)
    settings = fake_settings(tmp_path, study_db="fake_study", storage={"kind": "url", "env": ENV, "artifacts": None})

    def main(_settings, _role):
        raise RuntimeError(f"lost {url} (password s3cretWord)")

    for check in ("check_packages", "check_device", "check_model"):
        monkeypatch.setattr(launch, check, lambda *_args: None)
    monkeypatch.setattr(launch.contract.importlib, "import_module", lambda *_args: types.SimpleNamespace(main=main))
    assert launch.main(settings, ["--verbose"]) == launch.contract.EXIT_FAILED
    shown = "".join(capsys.readouterr())
    assert "unexpected RuntimeError" in shown and "Traceback" in shown
    assert "s3cretWord" not in shown
