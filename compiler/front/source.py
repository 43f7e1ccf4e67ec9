"""Loading a spec file: path in, a round-trip Document (plain data + positions) or located diagnostics out."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from compiler.diagnostics import Diagnostic, YamlPath, diag
from compiler.front import yaml_limits
from compiler.secret_text import secret_kind


@dataclass(frozen=True)
class Document:
    """A loaded spec: the file, its raw text, the ruamel tree (for positions) and plain data."""

    path: Path
    text: str
    tree: Any
    data: Any

    def locate(self, path: YamlPath, at_key: bool = False) -> tuple[int, int]:
        """YAML path in, 1-based (line, col) of the deepest node that exists out."""
        return locate(self.tree, path, at_key)


def locate(tree: Any, path: YamlPath, at_key: bool = False) -> tuple[int, int]:
    line, col = 0, 0
    node = tree
    if hasattr(node, "lc"):
        line, col = node.lc.line, node.lc.col
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, CommentedMap) and part in node:
            if last and at_key:
                line, col = node.lc.key(part)
            else:
                pos = node.lc.value(part)
                if pos is not None and pos[0] is not None:
                    line, col = pos
                else:
                    line, col = node.lc.key(part)
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            line, col = node.lc.item(part)
            node = node[part]
        else:
            break
    return line + 1, col + 1


def to_plain(value: Any) -> Any:
    """ruamel scalar and container subclasses in, builtin dict/list/str/int/float/bool/None out.

    Types with no builtin form (timestamps, binary) are kept as they are, so the schema
    pass reports them as wrong types.
    """
    if isinstance(value, dict):
        return {to_plain(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return bool(value) if type(value).__name__ == "ScalarBoolean" else int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def _mark_diag(code: str, err: MarkedYAMLError, summary: str) -> Diagnostic:
    mark = err.problem_mark or err.context_mark
    problem = (err.problem or summary).strip()
    d = diag(code, f"{summary}: {problem}" if problem != summary else summary,
             hint="check indentation, quoting and colons near this position")
    if mark is not None:
        return d.located(mark.line + 1, mark.column + 1)
    return d.located(1, 1)


def load(path: Path) -> tuple[Document | None, list[Diagnostic]]:
    """Spec file path in; (Document, []) or (None, [located diagnostic]) out. Never raises for bad input."""
    text = _read(path)
    if isinstance(text, Diagnostic):
        return None, [text]
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        broken = yaml_limits.check_structure(text)  # before ruamel recurses or expands aliases
        if broken is not None:
            return None, [broken]
        tree = yaml.load(text)
    except DuplicateKeyError as exc:
        d = _mark_diag("QAS101", exc, "duplicate key")
        key = _duplicate_key_name(exc)
        key = key if key is None or secret_kind(key) is None else "<a key holding a secret, not shown>"
        msg = f"duplicate key {key!r}: YAML keeps only one of them" if key else "duplicate key"
        return None, [Diagnostic(code=d.code, message=msg, line=d.line, col=d.col,
                                 hint="remove or rename one of the two entries")]
    except MarkedYAMLError as exc:
        return None, [_mark_diag("QAS100", exc, "YAML syntax error")]
    except YAMLError as exc:  # unmarked ruamel errors
        return None, [diag("QAS100", f"YAML error: {exc}").located(1, 1)]
    if not isinstance(tree, CommentedMap):
        kind = "empty" if tree is None else type(to_plain(tree)).__name__
        return None, [diag("QAS103", f"a spec must be a mapping of keys, this one is {kind}",
                           hint="start from `qas schema` or specs/example/spec.yaml").located(1, 1)]
    data = to_plain(tree)
    return Document(path=path, text=text, tree=tree, data=data), []


def _read(path: Path) -> str | Diagnostic:
    """Spec path in; its text (newlines made \\n, as read_text does) or a located QAS102/QAS104 out.

    The size is checked before reading, and at most one byte past the limit is ever read
    (a FIFO or a file still growing has no trustworthy size).
    """
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            too_big = yaml_limits.check_size(size)
            if too_big is not None:
                return too_big
            raw = handle.read(yaml_limits.MAX_BYTES + 1)
        too_big = yaml_limits.check_size(len(raw), exact=False)
        if too_big is not None:
            return too_big
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        return diag("QAS102", f"cannot read spec: {exc.__class__.__name__}: {exc}",
                    hint="the spec must be a UTF-8 text file").located(1, 1)


def _duplicate_key_name(exc: DuplicateKeyError) -> str | None:
    problem = exc.problem or ""
    # ruamel's wording: 'found duplicate key "name" with value ...'
    if '"' in problem:
        parts = problem.split('"')
        if len(parts) >= 2:
            return parts[1]
    return None


def non_finite_paths(value: Any, path: YamlPath = ()) -> list[YamlPath]:
    """Plain data in, the paths of NaN/inf numbers out (no such value may reach a script)."""
    found: list[YamlPath] = []
    if isinstance(value, float) and not math.isfinite(value):
        found.append(path)
    elif isinstance(value, dict):
        for k, v in value.items():
            found.extend(non_finite_paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found.extend(non_finite_paths(v, (*path, i)))
    return found
