"""`qas dashboard`: a search's output folder and where to listen in; optuna-dashboard serving its studies (grid and
sampler stage) read-only out, or a one-line error.

Read-only three ways: the journal is read through a backend that cannot append (Optuna's own would create a missing
file), a PostgreSQL session is opened with default_transaction_read_only, and the storage handed to the dashboard
refuses every write (its buttons for notes, deleting or creating studies answer with an error). The objective names
are shown by overlaying them on what the dashboard reads, never written into the study.

The CLI imports this module inside its command, so `import compiler` stays cheap.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optuna.storages import BaseStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study._frozen import FrozenStudy

from compiler.report.manifest import first_line, load_manifest
from compiler.runtime.contract import GRID_STUDY_SUFFIX, MANIFEST_FILE, OBJECTIVE_LABELS, QUANT_PLAN_FILE

INSTALL = "pip install 'optuna-dashboard>=0.21,<0.22'   (or: pip install 'qas-compiler[dashboard]')"
METRIC_NAMES_ATTR = "study:metric_names"  # Optuna's own key (Study.set_metric_names); the dashboard reads it


class ReadOnlyError(RuntimeError):
    """A write reached the read-only storage (a dashboard button that would change the study)."""


def host_problem(host: str, allow_remote: bool) -> str | None:
    """The --host value and --allow-remote in; why it is refused, or None. A loopback host is always fine; any other
    (0.0.0.0 included) only with --allow-remote: the dashboard has no login."""
    if _loopback(host) or allow_remote:
        return None
    return (f"--host {host} would let every machine that reaches it read the study (the dashboard has no login)\n"
            f"  hint: watch from another machine through an SSH tunnel (ssh -L 8080:127.0.0.1:8080 HOST), or pass "
            f"--allow-remote to listen on {host} anyway")


def remote_warning(host: str) -> str | None:
    """A warning line when the dashboard listens beyond this machine, else None."""
    if _loopback(host):
        return None
    where = "every network interface" if host in ("0.0.0.0", "::") else host
    return (f"qas: warning: the dashboard listens on {where}: anyone who reaches this port reads the study "
            f"(no login); prefer 127.0.0.1 and an SSH tunnel")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_dashboard() -> str | None:
    """None when optuna-dashboard imports, else the error line with the install command."""
    try:
        import optuna_dashboard  # noqa: F401
    except ImportError:
        return f"optuna-dashboard is not installed in {sys.executable}\n  hint: {INSTALL}"
    return None


def open_study(out_dir: Path) -> tuple[Any, dict[str, Any]] | str:
    """An output folder in; (a read-only storage holding its studies, facts to print: study names, where) out, or an
    error line. No study, database or file is created: a search that has not started is an error."""
    manifest = load_manifest(out_dir / MANIFEST_FILE)
    if isinstance(manifest, str):
        return manifest
    study = manifest["outputs"]["study"]
    names = [study["name"], study["name"] + GRID_STUDY_SUFFIX]
    url_env = study.get("url_env")
    db = out_dir / study["db"]
    where = f"${url_env}" if url_env else str(db)
    try:
        inner = _storage(db, url_env)
        if isinstance(inner, str):
            return inner
        held = {s.study_name: s for s in inner.get_all_studies()}
    except ReadOnlyError as exc:
        return f"cannot open {where} read-only: {exc}"
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's, psycopg's or Optuna's: a storage that cannot be read
        return (f"cannot read the study storage {where}: {type(exc).__name__}: "
                f"{first_line(getattr(exc, 'orig', None) or exc)}")
    if names[0] not in held:
        found = ", ".join(repr(n) for n in held) or "no studies"
        return f"no study {names[0]!r} in {where} (it holds {found}); has the search run?\n  hint: qas run {out_dir}"
    labels = _objective_names(out_dir, len(held[names[0]].directions))
    shown = {held[n]._study_id: labels for n in names if n in held and len(held[n].directions) == len(labels)}
    return ReadOnlyStorage(inner, shown), {"studies": [n for n in names if n in held], "where": where,
                                           "objectives": labels}


def _storage(db: Path, url_env: str | None) -> Any:
    """The study file or database, opened for reading only; an error line when it is not there."""
    import optuna

    if url_env is not None:
        from compiler.runtime.storage import POSTGRES_SCHEMES

        url = os.environ.get(url_env, "").strip()
        if not url:
            return f"the study is in the database named by ${url_env}, and ${url_env} is not set here"
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if scheme not in POSTGRES_SCHEMES:  # never echo the value: it holds a password
            return f"${url_env} is not a PostgreSQL URL (postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE)"
        if scheme == "postgresql":
            url = "postgresql+psycopg" + url[len("postgresql"):]
        return optuna.storages.RDBStorage(url, skip_table_creation=True, engine_kwargs={
            "connect_args": {"options": "-c default_transaction_read_only=on", "connect_timeout": 10}})
    from compiler.runtime.study_file import study_file_problem

    if not db.is_file():
        return f"no study file {db} (has the search run?)\n  hint: qas run {db.parent}"
    damaged = study_file_problem(db)
    if damaged is not None:
        return damaged
    if db.suffix == ".journal":
        return optuna.storages.JournalStorage(_ReadOnlyJournal(str(db)))
    import sqlite3

    uri = db.resolve().as_uri() + "?mode=ro"
    return optuna.storages.RDBStorage("sqlite://", skip_table_creation=True,
                                      engine_kwargs={"creator": lambda: sqlite3.connect(uri, uri=True)})


def _objective_names(out_dir: Path, count: int) -> list[str]:
    """What each of a trial's values is, from quant_plan.json: the metric (or the evaluator's drop/rise from the float
    model), then latency and size with search.objectives."""
    try:
        plan = json.loads((out_dir / QUANT_PLAN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        plan = {}
    settings = plan.get("settings", {})  # the settings a spec decided: a default is left out
    metric = settings.get("metric") or (settings.get("evaluator") or {}).get("function") or "objective"
    higher = plan.get("higher_is_better")
    accuracy = metric if higher is None else f"{metric} {'drop' if higher else 'rise'} from the float model"
    names = [accuracy] + [OBJECTIVE_LABELS.get(o, o) for o in settings.get("objectives", ["accuracy"])
                            if o != "accuracy"]
    return names if len(names) == count else [accuracy] + [f"objective {i}" for i in range(1, count)]


class _ReadOnlyJournal(JournalFileBackend):
    """Optuna's journal file reader without its writer: never creates the file (Optuna's would), never appends."""

    def __init__(self, file_path: str) -> None:
        self._file_path = file_path
        self._log_number_offset = {0: 0}

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        raise ReadOnlyError("qas dashboard opens the study read-only")


def _refused(name: str) -> Callable[..., Any]:
    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ReadOnlyError(f"qas dashboard opens the study read-only: {name} is refused")
    refused.__name__ = name
    return refused


class ReadOnlyStorage(BaseStorage):
    """A storage in; the same study data, every write refused, and the objective names (per study id) overlaid on
    what the dashboard reads, out."""

    def __init__(self, inner: BaseStorage, names: dict[int, list[str]]) -> None:
        self._inner, self._names = inner, names

    create_new_study = _refused("create_new_study")
    delete_study = _refused("delete_study")
    set_study_user_attr = _refused("set_study_user_attr")
    set_study_system_attr = _refused("set_study_system_attr")
    create_new_trial = _refused("create_new_trial")
    set_trial_param = _refused("set_trial_param")
    set_trial_state_values = _refused("set_trial_state_values")
    set_trial_intermediate_value = _refused("set_trial_intermediate_value")
    set_trial_user_attr = _refused("set_trial_user_attr")
    set_trial_system_attr = _refused("set_trial_system_attr")

    def get_all_studies(self) -> list[FrozenStudy]:
        return [FrozenStudy(study_name=s.study_name, direction=None, directions=s.directions, user_attrs=s.user_attrs,
                            system_attrs=self._with_names(s._study_id, s.system_attrs), study_id=s._study_id)
                for s in self._inner.get_all_studies()]

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self._with_names(study_id, self._inner.get_study_system_attrs(study_id))

    def _with_names(self, study_id: int, attrs: dict[str, Any]) -> dict[str, Any]:
        names = self._names.get(study_id)
        return attrs if names is None or METRIC_NAMES_ATTR in attrs else {**attrs, METRIC_NAMES_ATTR: names}

    # the reads go through to the real storage
    def get_study_id_from_name(self, study_name: str) -> int:
        return self._inner.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self._inner.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[Any]:
        return self._inner.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self._inner.get_study_user_attrs(study_id)

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return self._inner.get_trial_id_from_study_id_trial_number(study_id, trial_number)

    def get_trial(self, trial_id: int) -> Any:
        return self._inner.get_trial(trial_id)

    def get_all_trials(self, study_id: int, deepcopy: bool = True, states: Any = None) -> list[Any]:
        return self._inner.get_all_trials(study_id, deepcopy=deepcopy, states=states)

    def remove_session(self) -> None:
        self._inner.remove_session()


def serve(storage: Any, host: str, port: int) -> None:
    """Run optuna-dashboard on host:port until interrupted (Ctrl-C or SIGTERM)."""
    from optuna_dashboard import run_server

    run_server(storage, host=host, port=port)
