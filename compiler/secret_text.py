"""Secrets in spec text: a string in; whether it holds a database URL or connection string, or another password, out.

Shared by the schema stage (which refuses such strings, QAS330 / QAS336) and by the diagnostics' own text (a path
through a key that holds one is never printed as it is).
"""

from __future__ import annotations

import re

# A database URL anywhere in a string (jdbc:postgresql://... too): the scheme must not continue a longer word.
DATABASE_URL = re.compile(r"(?<![A-Za-z0-9+.-])(postgres(ql)?|mysql|mariadb|sqlite|oracle|mssql|sqlserver|cockroachdb|"
                          r"redis|rediss|mongodb|mongodb\+srv|timescaledb)(\+[A-Za-z0-9_]+)?://", re.IGNORECASE)
# The keywords of a libpq connection string (host=db dbname=x user=u password=p) and of an ODBC one (Server=...;).
CONNECTION_KEYWORDS = ("host", "hostaddr", "port", "dbname", "user", "password", "passfile", "sslmode", "sslpassword",
                       "service", "options", "server", "database", "uid", "pwd", "user id", "data source")
DATABASE_KEYWORDS = {"dbname", "database", "data source", "password", "pwd", "passfile", "sslmode", "sslpassword",
                     "service"}  # keywords only a database connection string has
KEYWORD = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(k) for k in CONNECTION_KEYWORDS) + r")\s*=",
                     re.IGNORECASE)
# A password in a URL's user part (scheme://user:password@host) or given as an option (password=..., ?pwd=...).
# '/' and '#' may be in a password written unencoded, but host:443/path@x is a port and a path, not a password.
URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@]*:(?![0-9]*(/|$))\S*@")
PASSWORD_OPTION = re.compile(r"(?<![A-Za-z0-9])(password|passwd|pwd|sslpassword)\s*=", re.IGNORECASE)
PASSWORD_KEY = re.compile(r"^(.*[_-])?(password|passwd|pwd)$", re.IGNORECASE)  # args: {password: ...}


def secret_kind(text: str) -> str | None:
    """A string in; "database" when it holds a database URL or connection string, "password" when it holds another
    password (in a URL's user part, or as password=...), None otherwise."""
    keys = {k.group(1).lower() for k in KEYWORD.finditer(text)}
    if DATABASE_URL.search(text) or (len(keys) >= 2 and keys & DATABASE_KEYWORDS):  # not just host=... port=...
        return "database"
    if URL_PASSWORD.search(text) or PASSWORD_OPTION.search(text):
        return "password"
    return None
