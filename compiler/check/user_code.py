"""What a user's Python file defines, read with ast (never imported at compile time): a path and a top-level name in;
facts about that definition out."""

from __future__ import annotations

import ast
from pathlib import Path


def yields(path: Path, name: str) -> bool | None:
    """Whether top-level function `name` of the file is a generator (a `yield` in its own body, not in a function
    nested in it); None when the file does not parse or defines no such function (the data pass says why)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return any(isinstance(inner, (ast.Yield, ast.YieldFrom)) for inner in _own_nodes(node))
    return None


def _own_nodes(function: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of a function's body, leaving out nested functions, lambdas and classes (their yields are theirs)."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found
