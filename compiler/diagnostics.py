"""Diagnostics as values: a code, a YAML path and a message in; text or JSON lines out."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from compiler.codes import CODES, Severity, severity_of
from compiler.secret_text import secret_kind

YamlPath = tuple[str | int, ...]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_path(path: YamlPath) -> str:
    """('search', 'space', 0) in, '$.search.space[0]' out; odd keys are quoted."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif secret_kind(part) is not None:  # a key that holds a database URL or password (QAS330, QAS336)
            out += "[<a key holding a secret, not shown>]"
        elif _IDENT.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


@dataclass(frozen=True)
class Diagnostic:
    """One finding. line/col are 1-based and filled in by the pipeline from the path."""

    code: str
    message: str
    path: YamlPath = ()
    hint: str | None = None
    at_key: bool = False  # point at the key itself rather than its value
    line: int | None = None
    col: int | None = None

    @property
    def severity(self) -> Severity:
        return severity_of(self.code)

    def located(self, line: int, col: int) -> Diagnostic:
        return replace(self, line=line, col=col)


def diag(code: str, message: str, path: YamlPath = (), hint: str | None = None, *, at_key: bool = False) -> Diagnostic:
    """Shorthand constructor; refuses codes missing from the registry."""
    if code not in CODES:
        raise KeyError(f"unregistered diagnostic code {code}")
    return Diagnostic(code=code, message=message, path=path, hint=hint, at_key=at_key)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


def sort_key(d: Diagnostic) -> tuple:
    return (d.line or 0, d.col or 0, d.code, d.message)


def to_text(diagnostics: Iterable[Diagnostic], filename: str) -> str:
    """Diagnostics in, ruff-style text out: 'file:L:C: error[CODE]: msg', 'at $.x', 'hint: ...'."""
    lines: list[str] = []
    for d in diagnostics:
        loc = f"{filename}:{d.line or 1}:{d.col or 1}"
        lines.append(f"{loc}: {d.severity.value}[{d.code}]: {d.message}")
        if d.path:
            lines.append(f"  at {format_path(d.path)}")
        if d.hint:
            lines.append(f"  hint: {d.hint}")
    return "\n".join(lines) + ("\n" if lines else "")


def to_items(diagnostics: Iterable[Diagnostic], filename: str) -> list[dict]:
    """Diagnostics in, JSON-ready dicts with the same fields as the text form out."""
    return [
        {
            "file": filename,
            "line": d.line or 1,
            "col": d.col or 1,
            "severity": d.severity.value,
            "code": d.code,
            "message": d.message,
            "path": format_path(d.path),
            "hint": d.hint,
        }
        for d in diagnostics
    ]


def summary_line(diagnostics: Iterable[Diagnostic]) -> str:
    counts = {s: 0 for s in Severity}
    for d in diagnostics:
        counts[d.severity] += 1
    return f"{counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s), {counts[Severity.NOTE]} note(s)"
