"""Database URLs written into a spec: plain spec data in; QAS330 diagnostics (with the paths they cover) out.

The spec is committed to git, and a storage URL holds a password, so a spec never holds one: `storage.url`,
`storage: postgresql://...`, or a database URL as any other storage value or top-level value is refused
before the schema reports it as an unknown key or a bad value. The URL goes into an environment variable
that `storage.url_env` names; compile never reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .diagnostics import Diagnostic, YamlPath, diag

ANY_URL = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]*://")
DATABASE_URL = re.compile(r"^\s*(postgres(ql)?|mysql|mariadb|sqlite|oracle|mssql|cockroachdb|redis)(\+[A-Za-z0-9_]+)?://",
                          re.IGNORECASE)
MESSAGE = ("the spec never holds a database URL (it would hold a password in git); put the URL in an "
           "environment variable and name it with storage.url_env")
HINT = "export QAS_STORAGE_URL='postgresql://...' where the workers run, and write storage: {url_env: QAS_STORAGE_URL}"


def database_urls(data: Any) -> Iterator[Diagnostic]:
    """Spec data in; a QAS330 for each place that holds a database URL out (its path is the place)."""
    if not isinstance(data, dict):
        return
    storage = data.get("storage")
    if isinstance(storage, str) and ANY_URL.match(storage):
        yield _refuse(("storage",))
    elif isinstance(storage, dict):
        for key, value in storage.items():
            if key == "url" or (isinstance(value, str) and DATABASE_URL.match(value)):
                yield _refuse(("storage", key), at_key=key == "url")
    for key, value in data.items():
        if key != "storage" and isinstance(value, str) and DATABASE_URL.match(value):
            yield _refuse((key,))


def covers(refused: list[Diagnostic], path: YamlPath) -> bool:
    """True when a diagnostic at `path` is about a place a QAS330 already reports."""
    return any(path[:len(d.path)] == d.path for d in refused)


def _refuse(path: YamlPath, at_key: bool = False) -> Diagnostic:
    return diag("QAS330", MESSAGE, path, hint=HINT, at_key=at_key)
