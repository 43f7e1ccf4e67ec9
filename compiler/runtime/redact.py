"""Database URLs made safe to show: a URL (or whatever an environment variable holds) in; text that never holds its
password out. The one place qas decides how a storage URL is printed, by the script, `qas status` and `qas report`.

`shown_url` renders a URL SQLAlchemy parses with the password (and every query value that is not a known harmless
connection option) replaced by ***, and checks the result against every way the raw text could be read, because
SQLAlchemy's parser splits some odd URLs (a password holding '@') elsewhere than a driver would. Anything it cannot
render safely is described by its scheme alone. `scrubbed` takes the password's pieces out of a library's error
text. The runtime imports only the standard library here (SQLAlchemy, which Optuna brings, inside a function).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

HIDDEN = "***"
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,39})://")
# A libpq connection string (host=... password=...) or an ODBC one (Server=...;Password=...).
KEY_VALUE = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_ ]*=")
# Query options whose values are no secret and help to tell databases apart; every other value is hidden.
SHOWN_QUERY_KEYS = frozenset({"sslmode", "connect_timeout", "application_name", "target_session_attrs", "gssencmode",
                              "channel_binding", "client_encoding", "keepalives", "keepalives_idle", "host", "hostaddr",
                              "port", "dbname"})
MIN_SCRUBBED = 3  # shorter pieces are scrubbed from error text as whole words only (not every "a" in every word)


def shown_url(url: str) -> str:
    """A URL in; the URL with its password and secret query values as ***, or "a <scheme> URL (not shown)" when it
    cannot be shown safely, or a description of what it is otherwise. Never the password, whatever the input."""
    rendered = _safe_rendering(url)
    return rendered if rendered is not None else described(url)


def described(url: str) -> str:
    """What a URL is, without any of its text but the scheme: for messages that must not show it at all."""
    scheme = SCHEME.match(url.strip())
    if scheme:
        return f"a {scheme.group(1)} URL (not shown)"
    if KEY_VALUE.match(url):
        return "a key=value connection string (not shown), not a URL"
    return "a value that is not a URL (not shown)"


def scrubbed(text: str, url: str) -> str:
    """A library's error text about `url` in; the same with every piece of the password (raw and decoded) and of the
    secret query values replaced by ***: anywhere for pieces of MIN_SCRUBBED characters or more, as whole words for
    shorter ones. A driver may quote the host or option it misread out of an odd URL, holding part of the password."""
    for piece in sorted(_secret_pieces(url, minimum=1), key=len, reverse=True):
        word = re.escape(piece)
        text = re.sub(word if len(piece) >= MIN_SCRUBBED else rf"(?<!\w){word}(?!\w)", HIDDEN, text)
    return text


def _safe_rendering(url: str) -> str | None:
    """SQLAlchemy's rendering of the URL with the password and the secret query values hidden, if it parses and no
    piece of the password (as any reading of the raw text could take it) is left in it; None otherwise."""
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        query = {key: (value if key.lower() in SHOWN_QUERY_KEYS else HIDDEN) for key, value in parsed.query.items()}
        rendered = parsed.set(query=query).render_as_string(hide_password=True).replace("%2A%2A%2A", HIDDEN)
    except Exception:  # noqa: BLE001 - any parse failure: fall back to the scheme alone
        return None
    after_scheme = rendered.split("://", 1)[-1]
    if any(piece in after_scheme for piece in _secret_pieces(url, minimum=1)):
        return None
    return rendered


def _secret_pieces(url: str, minimum: int) -> set[str]:
    """Every text that could be (part of) the URL's password or a secret query value, however the URL is read."""
    regions = [] if SCHEME.match(url.strip()) else [url.strip()]  # not a URL: all of it may be the secret
    rest = url.split("://", 1)[1] if "://" in url else url
    colon = rest.find(":")
    if colon >= 0:  # user:password@host: the password runs from the first ':' to any of the '@' after it
        regions += [rest[colon + 1:at] for at in _positions(rest, "@") if at > colon]
    # key=value forms, in a query string or a libpq/ODBC connection string: every value but the harmless ones
    for key, value in re.findall(r"([A-Za-z_][A-Za-z0-9_ ]*)=([^&;\s]*)", url):
        if key.strip().lower() not in SHOWN_QUERY_KEYS:
            regions.append(value)
    pieces = set()
    for region in regions:
        for text in (region, unquote(region)):
            pieces.add(text)
            pieces.update(re.split(r"[@/?#:&;=\s]+", text))
            pieces.update(re.split(r"\W+", text))  # a library may quote a word of it (Optuna's str.format: {word})
    return {p for p in pieces if len(p) >= minimum}


def _positions(text: str, char: str) -> list[int]:
    return [i for i, c in enumerate(text) if c == char]
