"""Database URLs and passwords written into a spec: plain spec data in; QAS330 / QAS336 diagnostics (with the paths
they cover) out.

The spec is committed to git, and a storage URL holds a password, so a spec never holds one: `storage.url`,
`storage: postgresql://...`, and a database URL, a libpq or ODBC connection string, or a password in a URL
(user:password@, ?password=) in any string of the document (every value and key, however deep, the user's own
reader and evaluator arguments included) are refused before the schema reports them as unknown keys or bad values,
so no message ever repeats the value. The URL goes into an environment variable that `storage.url_env` names;
compile never reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from compiler.diagnostics import Diagnostic, YamlPath, diag
from compiler.secret_text import PASSWORD_KEY, secret_kind

ANY_URL = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]*://")
MESSAGE = ("the spec never holds a database URL (it would hold a password in git); put the URL in an "
           "environment variable and name it with storage.url_env")
HINT = "export QAS_STORAGE_URL='postgresql://...' where the workers run, and write storage: {url_env: QAS_STORAGE_URL}"
PASSWORD_MESSAGE = ("the spec never holds a password (it would be in git, and in the script, the plan and the "
                    "manifest compile writes): this string has one")
PASSWORD_HINT = ("keep the secret in an environment variable and read it where it is used (your reader or evaluator: "
                 "os.environ[...]); for the study's database, write storage: {url_env: QAS_STORAGE_URL}")


def database_urls(data: Any) -> Iterator[Diagnostic]:
    """Spec data in; a QAS330 for each place that holds a database URL or connection string, a QAS336 for each other
    place that holds a password, out (its path is the place)."""
    if not isinstance(data, dict):
        return
    storage = data.get("storage")
    refused: list[YamlPath] = []
    if isinstance(storage, str) and ANY_URL.match(storage):
        refused.append(("storage",))
        yield _refuse(("storage",))
    elif isinstance(storage, dict) and "url" in storage:
        refused.append(("storage", "url"))
        yield _refuse(("storage", "url"), at_key=True)
    for path, text, at_key in _strings(data, ()):
        if any(path[:len(r)] == r for r in refused):
            continue
        named = at_key and PASSWORD_KEY.match(text) is not None and _filled(data, path)  # args: {password: hunter2}
        kind = secret_kind(text) or ("password" if named else None)
        if kind is not None:
            refused.append(path)
            yield (_refuse(path, at_key=at_key) if kind == "database" else
                   diag("QAS336", PASSWORD_MESSAGE, path, hint=PASSWORD_HINT, at_key=False))


def covers(refused: list[Diagnostic], path: YamlPath) -> bool:
    """True when a diagnostic at `path` is about a place a QAS330 or QAS336 already reports (so it would show the
    value)."""
    return any(path[:len(d.path)] == d.path for d in refused)


def _filled(data: Any, path: YamlPath) -> bool:
    """True when the value at `path` is a non-empty string or number (a password, not a flag or a sub-mapping)."""
    for step in path:
        data = data[step]
    return isinstance(data, (str, int)) and not isinstance(data, bool) and data != ""


def _strings(value: Any, path: YamlPath) -> Iterator[tuple[YamlPath, str, bool]]:
    """Every string of the document, keys included: (its path, the text, True for a key)."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield (*path, key), key, True
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _refuse(path: YamlPath, at_key: bool = False) -> Diagnostic:
    return diag("QAS330", MESSAGE, path, hint=HINT, at_key=at_key)
