"""The report's reading of the Optuna study DB: a DB path and study names in; the studies and their trials
(opened read-only) out, and from a study's complete trials, the parameter importances.

Optuna and SQLAlchemy are imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from pathlib import Path
from typing import Any

from compiler.report.manifest import first_line
from compiler.runtime.redact import scrubbed
from compiler.runtime.study_file import KEEP_IT, study_file_problem

ROUGH_BELOW = 50  # PED-ANOVA wants >= 5 trials in its top 10 %, so importances from fewer trials are rough


def load_studies(db: Path, name: str, grid_name: str, url_env: str | None = None,
                 engine: str | None = None) -> list[tuple[Any, list[Any]]] | str:
    """The study file (a journal, or SQLite) or, with url_env, the database named by that environment variable, and
    the study names in; [(study, its trials)] opened for reading out (the grid study second, when there is one),
    or an error line. With `engine` (whose studies qas itself creates), a study another program made under the
    name is refused."""
    if url_env is None:
        if not db.is_file():
            return (f"no study file {db}: the search has not run yet, or the file was deleted (restore it from a "
                    "copy to keep its trials; a run starts it over)")
        damaged = study_file_problem(db)
        if damaged is not None:
            return f"{damaged}; {KEEP_IT}"
    elif not os.environ.get(url_env):
        return f"the study is in the database named by ${url_env}, and ${url_env} is not set here"
    with warnings.catch_warnings():
        # list choices (Quark's PercentileCandidates) load with a warning about persistent storage; the
        # importances note says what matters about them
        warnings.filterwarnings("ignore", "Choices for a categorical distribution", UserWarning)
        loaded = _load(db, name, grid_name, url_env, engine)
    if isinstance(loaded, str) and url_env is not None:  # a driver's message may quote a piece of a malformed URL
        return scrubbed(loaded, os.environ.get(url_env, ""))
    return loaded


def _reader(db: Path, url_env: str | None) -> Any:
    """A storage that reads the study and never creates, migrates or writes it."""
    import optuna

    if url_env is not None:
        from compiler.runtime.storage import storage_url

        return optuna.storages.RDBStorage(storage_url(url_env), skip_table_creation=True,
                                          skip_compatibility_check=False)
    if db.suffix == ".journal":
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(str(db)))  # reads the log; writes nothing
    uri = db.resolve().as_uri() + "?mode=ro"  # read-only SQLite
    return optuna.storages.RDBStorage("sqlite://", engine_kwargs={"creator": lambda: sqlite3.connect(uri, uri=True)})


def _load(db: Path, name: str, grid_name: str, url_env: str | None,
          engine: str | None) -> list[tuple[Any, list[Any]]] | str:
    """load_studies' work, under its warning filter."""
    import optuna
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import DatabaseError, OperationalError

    from compiler.runtime.contract import ENGINES
    from compiler.runtime.storage import (
        foreign_study_problem,
        is_storage_error,
        open_failure,
        storage_url,
    )

    path = db
    if url_env is not None:
        db = Path(f"${url_env}")  # how the messages below name the storage
    try:
        storage = _reader(db, url_env)
        names = optuna.get_all_study_names(storage)
        if name not in names:
            held = ", ".join(repr(n) for n in names) or "no studies"
            return f"no study {name!r} in {db} (it holds {held})"
        studies = [optuna.load_study(study_name=n, storage=storage) for n in (name, grid_name) if n in names]
        loaded = [(study, study.get_trials(deepcopy=False)) for study in studies]
        if engine in ENGINES and not ENGINES[engine].quark_loop:  # Quark's own loop writes trials qas does not mark
            for study, trials in loaded:
                problem = foreign_study_problem(study.study_name, str(db), study.user_attrs, trials)
                if problem is not None:
                    return problem
        for study in studies:  # several objectives: accuracy first (search.objectives), the rest latency and size
            if len(study.directions) not in (1, 2, 3):
                return f"study {study.study_name!r} in {db} has {len(study.directions)} objectives; qas uses 1 to 3"
        if len(studies) == 2 and studies[0].directions != studies[1].directions:
            return f"studies {name!r} and {grid_name!r} in {db} optimize in opposite directions"
        return loaded
    except OperationalError as exc:  # the database server did not answer
        if url_env is not None:
            return open_failure(storage_url(url_env), url_env, exc)  # as the script says it
        return f"cannot reach the study storage {db}: {first_line(getattr(exc, 'orig', None) or exc)}"
    except DatabaseError as exc:  # not SQLite, or SQLite without Optuna's tables (read-only, so not created)
        return f"{db} is not a readable Optuna study database: {first_line(getattr(exc, 'orig', None) or exc)}"
    except (StorageInternalError, RuntimeError) as exc:  # RuntimeError: schema from another Optuna version
        if url_env is not None and is_storage_error(exc):  # Optuna's "exception during the commit": say why
            return open_failure(storage_url(url_env), url_env, exc)
        return f"cannot read {db}: {first_line(exc)}"
    except (OSError, ValueError) as exc:  # the study file changed while it was read (truncated, deleted, ...)
        if url_env is not None:
            raise
        problem = study_file_problem(path) if path.exists() else f"the study file {path} is gone (deleted?)"
        return f"{problem or f'cannot read the study file {path}: {first_line(exc)}'}; {KEEP_IT}"


def heartbeat_ages(url_env: str, names: list[str]) -> dict[tuple[str, int], float]:
    """The database in $url_env and study names in; (study name, trial number) -> seconds since the last heartbeat of
    each RUNNING trial that has one, out (empty when the database cannot say). PostgreSQL's own clock on both sides."""
    from sqlalchemy import bindparam, text

    query = text("SELECT s.study_name, t.number, EXTRACT(EPOCH FROM (LOCALTIMESTAMP - h.heartbeat)) "
                 "FROM trial_heartbeats h JOIN trials t ON t.trial_id = h.trial_id "
                 "JOIN studies s ON s.study_id = t.study_id "
                 "WHERE t.state = 'RUNNING' AND s.study_name IN :names").bindparams(bindparam("names", expanding=True))
    try:
        storage = _reader(Path(), url_env)
        try:
            with storage.engine.connect() as connection:
                rows = connection.execute(query, {"names": names}).all()
        finally:
            storage.engine.dispose()
    except Exception:  # noqa: BLE001 - the study was just read; a second look that fails only loses the ages
        return {}
    return {(name, number): float(age) for name, number, age in rows}


def varying(params: list[dict[str, Any]]) -> list[str]:
    """Param dicts in; the parameters that took more than one value among them (in first-seen order) out."""
    seen: dict[str, set[str]] = {}
    for found in params:
        for key, value in found.items():
            seen.setdefault(key, set()).add(repr(value))  # repr: True and 1 are different choices
    return [key for key, values in seen.items() if len(values) > 1]


def importances(study: Any, complete: list[Any]) -> tuple[dict[str, float], list[str]]:
    """The study and its complete trials in; (param -> importance, notes) out. Skipped when meaningless, and
    parameters Optuna cannot rank (list choices) are left out with a note.

    Optuna 5's default evaluator (PED-ANOVA) raises on none of the degenerate cases: it warns and returns
    equal shares instead, so the cases are caught here first and the remaining warnings become notes.
    """
    import optuna

    if len(complete) < 2:
        return {}, [f"no importances: they need 2 or more complete trials, found {len(complete)}"]
    if len({t.values[0] for t in complete}) < 2:
        return {}, ["no importances: every complete trial scored the same"]
    changed = varying([t.params for t in complete])
    if not changed:
        return {}, ["no importances: no parameter took more than one value"]
    notes = []
    constant = len({k for t in complete for k in t.params}) - len(changed)
    if constant:
        notes.append(f"importances leave out {constant} parameter(s) that never changed")
    unrankable = [key for key in changed if not _rankable(key, complete)]
    if unrankable:
        notes.append(f"importances leave out {', '.join(unrankable)}: {'its' if len(unrankable) == 1 else 'their'} "
                     f"choices are lists, which Optuna cannot rank")
        changed = [key for key in changed if key not in unrankable]
        if not changed:
            return {}, [*notes, "no importances: no other parameter took more than one value"]
    if len(complete) < ROUGH_BELOW:
        notes.append(f"importances from {len(complete)} complete trials are rough "
                     f"(PED-ANOVA wants {ROUGH_BELOW} or more)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = optuna.importance.get_param_importances(study, params=changed)
    notes += list(dict.fromkeys(f"importances: {w.message}" for w in caught))
    return {key: float(value) for key, value in found.items()}, notes


def _rankable(key: str, complete: list[Any]) -> bool:
    """A parameter and the complete trials in; False when Optuna's importance evaluators cannot take it out.

    They group trials by the parameter's distribution, so its choices must be hashable; Quark's presets have
    categoricals whose choices are lists (A8W8_SEARCH's PercentileCandidates).
    """
    for trial in complete:
        try:
            hash(trial.distributions.get(key))
        except TypeError:
            return False
    return True
