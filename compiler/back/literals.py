"""The one way spec values reach generated code: a builtin value in, checked Python literal text out."""

from __future__ import annotations

import ast
import math
from typing import Any


class LiteralError(ValueError):
    """A value that cannot be written as a safe literal (a bug upstream: the schema should refuse it)."""


def py_literal(value: Any, indent: int = 0) -> str:
    """None/bool/int/float/str/list/tuple/dict-with-str-keys in; repr-based literal text out.

    Containers are laid out one item a line for readable diffs; the result is re-read with
    ast.literal_eval and must equal the input, else LiteralError.
    """
    text = _render(value, indent)
    if ast.literal_eval(text) != value or not _same_types(ast.literal_eval(text), value):
        raise LiteralError(f"literal round-trip changed the value: {text!r}")
    return text


def _render(value: Any, indent: int) -> str:
    pad, inner = "    " * indent, "    " * (indent + 1)
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise LiteralError("NaN and infinity have no literal")
        return repr(float(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, (list, tuple)):
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        if not value:
            return "()" if isinstance(value, tuple) else "[]"
        items = [_render(v, indent + 1) for v in value]
        if isinstance(value, tuple) and len(items) == 1:
            items[0] += ","
        flat = f"{open_}{', '.join(items)}{close}"
        if "\n" not in flat and len(flat) <= 80:
            return flat
        return open_ + "\n" + "".join(f"{inner}{i},\n" for i in items) + pad + close
    if isinstance(value, dict):
        if not value:
            return "{}"
        for k in value:
            if not isinstance(k, str):
                raise LiteralError(f"dict key {k!r} is not a string")
        pairs = [(_render(k, indent + 1), _render(v, indent + 1)) for k, v in value.items()]
        scalars_only = all(not isinstance(v, (dict, list, tuple)) for v in value.values())
        flat = "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        if scalars_only and "\n" not in flat and len(flat) <= 80:
            return flat
        lines = [f"{inner}{k}: {v},\n" for k, v in pairs]
        return "{\n" + "".join(lines) + pad + "}"
    raise LiteralError(f"{type(value).__name__} values cannot reach generated code")


def _same_types(a: Any, b: Any) -> bool:
    if type(a) is not type(b) and not (isinstance(a, list) and isinstance(b, list)):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    return True
