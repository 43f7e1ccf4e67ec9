"""Where a study lives: settings in; an Optuna storage for the search (or for reading, for reports) out.

Three kinds (settings.storage["kind"]):
- journal: Optuna's JournalStorage on <name>_study.journal in the output folder (JournalFileBackend,
  whose file lock makes it safe for several worker processes on one machine; SQLite is not: "database
  is locked"). Workers on other machines cannot share it.
- sqlite: <name>_study.db, engine autosearchpro only (Quark hard-wires SQLite and one process).
- url: a PostgreSQL URL read at run time from the environment variable settings.storage["env"] (the spec
  never holds it: it would hold a password). Heartbeats are on, so the trial of a worker that died on
  another machine is failed by the others after the grace period.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import contract
from .checks import fail
from .redact import scrubbed, shown_url

SCHEMA_LOCK_KEY = 0x716173  # "qas": the advisory lock around Optuna's table creation
CONNECT_TIMEOUT_SECONDS = 10  # a host that drops packets is a lost storage after this, not a hang
POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg", "postgresql+psycopg2")


def storage_url(env: str) -> str:
    """The URL in environment variable `env`; a clear stop when it is unset or not PostgreSQL."""
    url = os.environ.get(env, "").strip()
    if not url:
        fail(f"the study's storage is the database URL in ${env}, and ${env} is not set; set it to "
             f"postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE (from a secret, not the spec)")
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in POSTGRES_SCHEMES:
        fail(f"${env} is not a PostgreSQL URL (it holds {shown_url(url)}); qas shares studies on "
             "PostgreSQL: postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE")
    if scheme == "postgresql":  # SQLAlchemy's default driver is psycopg2; the one qas installs is psycopg 3
        url = "postgresql+psycopg" + url[len("postgresql"):]
    return url


def shown(url: str) -> str:
    """A URL as it may be printed: the password replaced by *** (redact.shown_url)."""
    return shown_url(url)


def open_storage(kind: str, study_path: Path, env: str | None = None,
                 heartbeat: float | None = None, grace: float | None = None) -> Any:
    """The search's storage (read-write; a journal or database is created when absent)."""
    import optuna

    if kind == "journal":
        from optuna.storages.journal import JournalFileBackend

        from .lock import FileLock

        # An fcntl lock for the journal's appends: Optuna's own lock files outlive a SIGKILLed writer and block
        # every other worker for their 30 s grace period; the OS releases an fcntl lock at once.
        lock = FileLock(study_path.with_name(study_path.name + ".writelock"))
        return optuna.storages.JournalStorage(guarded_journal(JournalFileBackend)(str(study_path), lock_obj=lock))
    if kind == "sqlite":
        return optuna.storages.RDBStorage(f"sqlite:///{study_path}")
    if kind == "url":
        url = storage_url(env or "")
        try:
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # heartbeats: in use
            with _schema_lock(url):  # workers starting together on a new database would each create the tables
                return optuna.storages.RDBStorage(
                    url, heartbeat_interval=int(max(1, round(heartbeat or contract.DEFAULT_HEARTBEAT_SECONDS))),
                    grace_period=int(max(2, round(grace or contract.DEFAULT_GRACE_SECONDS))),
                    engine_kwargs={"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_SECONDS}})
        except Exception as error:  # noqa: BLE001 - a wrong host, password or database: say which, no traceback
            fail(open_failure(url, env or "", error))
    raise ValueError(f"unknown storage kind {kind!r}")


def open_failure(url: str, env: str, error: BaseException) -> str:
    """The database URL, its variable and the error opening it in; what is wrong, for the script and `qas status`
    and `qas report` alike (the password masked; PostgreSQL's own messages never hold it)."""
    return f"cannot open the study storage {shown(url)} (from ${env}): {scrubbed(storage_error_text(error), url)}"


def storage_error_text(error: BaseException) -> str:
    """An error from opening or reading a database in; what went wrong, in words, out. Optuna wraps SQLAlchemy's
    errors in StorageInternalError ("an exception is raised during the commit ..."), so the cause is read."""
    cause: BaseException | None = error
    while cause is not None and type(cause).__name__ == "StorageInternalError":
        cause = cause.__cause__ or cause.__context__
    cause = cause or error
    text = str(getattr(cause, "orig", None) or cause).strip()
    line = text.splitlines()[0] if text else type(cause).__name__
    detail = line.split("FATAL:", 1)[1].strip() if "FATAL:" in line else line
    if "password authentication failed" in detail:
        return f"the password (or user) is wrong: {detail}; set the right one in the URL"
    if "database" in detail and "does not exist" in detail:
        return f"{detail} on that server; create it (createdb) or correct the database name in the URL"
    if "role" in detail and "does not exist" in detail:
        return f"{detail} on that server; correct the user in the URL"
    if "permission denied" in detail:
        return f"{detail}; the user needs the right to create and write Optuna's tables (a database it owns)"
    if "Connection refused" in detail or "timeout expired" in detail or "could not translate host name" in detail:
        return f"no PostgreSQL server answers there ({detail}); check the host and port, and that the server runs"
    return f"{type(cause).__name__}: {detail}"


def guarded_journal(backend: type) -> type:
    """Optuna's JournalFileBackend class in; a subclass out that stops the search cleanly, naming the file and what to
    do, when the journal is deleted, replaced, truncated or made unwritable under it while it runs. Optuna's own
    would raise FileNotFoundError, PermissionError or JSONDecodeError mid-trial, silently recreate a deleted file on
    its next append, or (truncated to fewer records than it had read) see no change again and wait forever."""

    class GuardedJournalFileBackend(backend):  # type: ignore[misc, valid-type]
        def __init__(self, file_path: str, lock_obj: Any = None) -> None:
            super().__init__(file_path, lock_obj=lock_obj)
            found = os.stat(file_path)
            self._identity = (found.st_dev, found.st_ino)

        def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
            self._check()
            try:
                yield from super().read_logs(log_number_from)
            except (OSError, ValueError) as error:  # ValueError: JSONDecodeError, Optuna's "Invalid log format"
                self._check()
                journal_lost(self._file_path, f"cannot be read ({type(error).__name__}: {error})", KEEP_JOURNAL)

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            self._check()
            try:
                super().append_logs(logs)
            except OSError as error:
                self._check()
                journal_lost(self._file_path, f"cannot be written ({type(error).__name__}: "
                                              f"{error.strerror or error})",
                             f"make it writable again (chmod u+w {self._file_path}; chattr -i if it was made "
                             "immutable), then re-run to resume: the trials it holds are safe")

        def _check(self) -> None:
            """Stop unless the file is the one opened, and holds at least what was read of it."""
            path = self._file_path
            try:
                found = os.stat(path)
            except FileNotFoundError:
                journal_lost(path, "was deleted while the search ran", RESTORE_JOURNAL)
            except OSError as error:
                journal_lost(path, f"cannot be read ({error.strerror or error})", KEEP_JOURNAL)
            if (found.st_dev, found.st_ino) != self._identity:
                journal_lost(path, "was replaced by another file while the search ran", RESTORE_JOURNAL)
            read = max(getattr(self, "_log_number_offset", {0: 0}).values())
            if found.st_size < read or (read and _byte_before(path, read) != b"\n"):
                journal_lost(path, f"was truncated or rewritten while the search ran (it holds {found.st_size} "
                                   f"bytes; this worker had read {read})", RESTORE_JOURNAL)

    return GuardedJournalFileBackend


RESTORE_JOURNAL = ("restore it from a copy and re-run to resume, or move it away and re-run to start the search over; "
                   "the other workers stop too")
KEEP_JOURNAL = "qas leaves it as it is: restore it from a copy, or move it away to start the search over"


def _byte_before(path: str, offset: int) -> bytes:
    """The byte at offset - 1 of a file: a newline where a record this worker read ended, unless it was rewritten."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset - 1)
            return handle.read(1)
    except OSError:  # gone since the stat: the next look says so
        return b"\n"


def journal_lost(path: str, what: str, todo: str) -> None:
    """Stop the search (EXIT_FAILED) on a journal that changed under it: its path, what happened and what to do."""
    from .checks import SearchError
    from .console import warn

    warn(f"qas: error: the study file {path} {what}; {todo}")
    raise SearchError(contract.EXIT_FAILED)


@contextlib.contextmanager
def advisory_lock(engine: Any, key: int) -> Iterator[None]:
    """Hold PostgreSQL's session advisory lock `key` on one of `engine`'s connections for the `with` block (released by
    the server if this process dies)."""
    from sqlalchemy import text

    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})


@contextlib.contextmanager
def _schema_lock(url: str) -> Iterator[None]:
    """Hold an advisory lock while Optuna checks (and, on a new database, creates) its tables."""
    from sqlalchemy import create_engine

    engine = create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS})
    try:
        with advisory_lock(engine, SCHEMA_LOCK_KEY):
            yield
    finally:
        engine.dispose()


def open_storage_for(settings: Any) -> Any:
    """open_storage for a compiled search's settings."""
    s = settings.storage
    return open_storage(s["kind"], settings.path(settings.study_db), s.get("env"), s.get("heartbeat"), s.get("grace"))


def describe(settings: Any) -> str:
    """Where the study lives, for messages: a file name or $ENV."""
    if settings.storage_kind == "url":
        return f"the database in ${settings.storage['env']}"
    return settings.study_db


QAS_TRIAL_ATTRS = (contract.ATTR_STAGE, contract.ATTR_SLOT, contract.ATTR_WORKER)  # any of them: a qas trial


def foreign_study_problem(name: str, where: str, study_attrs: dict[str, Any], trials: list[Any]) -> str | None:
    """A study's name, where it is, its user attributes and trials in; why it is not a qas study (another program
    made it under this name), or None. qas marks each study it creates (QAS_STUDY_ATTR) and each trial it runs or
    queues (QAS_TRIAL_ATTRS); an empty unmarked study may be one another worker is creating now, so it passes."""
    if contract.QAS_STUDY_ATTR in study_attrs or not trials:
        return None
    if any(key in t.user_attrs for t in trials for key in QAS_TRIAL_ATTRS):
        return None  # written by a qas from before the study mark
    return (f"study {name!r} in {where} is not a qas study: none of its {len(trials)} trial(s) carries qas's "
            f"attributes ({', '.join(QAS_TRIAL_ATTRS)}), so another program wrote it under this name; qas leaves it "
            "as it is: delete or rename that study (optuna delete-study, optuna.copy_study), or keep this search's "
            "study elsewhere (another database in storage.url_env, or another output.study_name)")


def refuse_foreign_studies(storage: Any, names: list[str], existing: set[str], where: str) -> None:
    """Stop before the search touches a study of its name that another program made."""
    for name in names:
        if name in existing:
            study_id = storage.get_study_id_from_name(name)
            problem = foreign_study_problem(name, where, storage.get_study_user_attrs(study_id),
                                            storage.get_all_trials(study_id, deepcopy=False))
            if problem is not None:
                fail(problem)


def mark_studies(studies: dict[str, Any]) -> None:
    """Mark the search's studies as qas's ({role: study} in), once: what foreign_study_problem looks for."""
    for role, study in studies.items():
        if contract.QAS_STUDY_ATTR not in study.user_attrs:
            study.set_user_attr(contract.QAS_STUDY_ATTR, role)


POLL_SECONDS = 1.0  # how often a worker waiting on other workers' trials looks again
STORAGE_RETRIES = (2.0, 4.0, 8.0, 16.0)  # seconds between tries when the storage does not answer; then stop


def wait_between_polls() -> None:
    """Wait one poll interval; a stop signal ends the wait (as KeyboardInterrupt)."""
    import time

    from . import stopping

    time.sleep(POLL_SECONDS)
    if stopping.requested():
        raise KeyboardInterrupt


def is_storage_error(error: BaseException) -> bool:
    """The storage (a database, over the network) failed to answer, as opposed to a trial or a bug. Optuna wraps
    every SQLAlchemy error in StorageInternalError, so the cause decides: a connection that failed
    (OperationalError)."""
    try:
        from sqlalchemy.exc import OperationalError
    except ImportError:
        return False
    return isinstance(error, OperationalError) or isinstance(error.__cause__, OperationalError)


class Heartbeat:
    """While a trial runs on a storage with heartbeats (PostgreSQL), record one every interval from a thread, so
    the other workers know this worker lives; without heartbeats (a journal file), nothing."""

    def __init__(self, storage: Any, trial_id: int) -> None:
        self.storage = storage
        self.trial_id = trial_id
        self.interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
        self._stop: Any = None

    def __enter__(self) -> Heartbeat:
        if self.interval:
            import threading

            self.storage.record_heartbeat(self.trial_id)
            self._stop = threading.Event()
            threading.Thread(target=self._beat, name="qas-heartbeat", daemon=True).start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # the database is away: the main thread finds out and says so
                self.storage.record_heartbeat(self.trial_id)

    def __exit__(self, *_exc: Any) -> None:
        if self._stop is not None:
            self._stop.set()


def check_study_storage(settings: Any) -> None:
    """Before Optuna opens a study file: stop on an emptied or damaged one, or on a study left in the SQLite file
    an earlier qas wrote (the journal would silently start the search over beside it)."""
    from .study_file import check_study_file

    if settings.storage_kind == "url":
        return
    path = settings.path(settings.study_db)
    check_study_file(path)
    legacy = path.with_suffix(".db")
    if settings.storage_kind == "journal" and not path.exists() and legacy.exists():
        fail(f"this output folder holds its study in {legacy.name} (SQLite, written by an earlier qas) and the "
             f"search now keeps it in {path.name}; copy it over once with python -c \"import optuna; from "
             f"optuna.storages.journal import JournalFileBackend as J; optuna.copy_study(from_study_name='"
             f"{settings.study_name}', from_storage='sqlite:///{legacy.name}', to_storage=optuna.storages."
             f"JournalStorage(J('{path.name}')))\" (and the same for '{settings.grid_study_name}'), or move "
             f"{legacy.name} away to start over")
