"""The study file (an Optuna journal, or SQLite) before Optuna opens it: a path in; nothing out, or a clear stop
naming the file.

Optuna would turn an emptied file into a new, empty study (the search silently starts over) and a
damaged one into a raw traceback (or, for a journal cut off mid-line, a file every later append
breaks). The file is only read here, and never rewritten.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .checks import fail

SQLITE_HEADER = b"SQLite format 3\x00"
KEEP_IT = "qas leaves it as it is: restore it from a copy, or move it away to start the search over"


def check_study_file(path: Path) -> None:
    """Stop unless `path` is absent (a new search) or a readable, intact SQLite database."""
    problem = study_file_problem(path)
    if problem is not None:
        fail(f"{problem}; {KEEP_IT}")


def study_file_problem(path: Path) -> str | None:
    """What is wrong with an existing study file (`qas report` says the same), or None when absent or intact."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        return f"the study file {path} cannot be read: {error.strerror or error}"
    if not header:
        return f"the study file {path} is empty (truncated?), so its trials are lost"
    if path.suffix == ".journal":
        problem = _journal_problem(path)
        return None if problem is None else f"the study file {path} is {problem}"
    if header != SQLITE_HEADER:
        return f"the study file {path} is not a SQLite database (damaged, or another file)"
    problem = _integrity_problem(path)
    return None if problem is None else f"the study file {path} is damaged ({problem})"


def _integrity_problem(path: Path) -> str | None:
    """SQLite's quick_check over a read-only connection: None when intact, else what it found."""
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as connection:
            rows = connection.execute("PRAGMA quick_check").fetchall()
            tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        return str(error)
    if rows != [("ok",)]:
        return "; ".join(str(r[0]) for r in rows[:3])
    if "studies" not in tables:
        return "it holds no Optuna studies table"
    return None


def _journal_problem(path: Path) -> str | None:
    """None when every line of an Optuna journal is a complete JSON operation, else what is wrong."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                return f"cut off in its last line ({number}: a write that never finished)"
            try:
                operation = json.loads(line)
            except ValueError:
                return f"damaged (line {number} is not JSON)"
            if not isinstance(operation, dict) or "op_code" not in operation:
                return "not an Optuna journal (damaged, or another file)"
    return None
