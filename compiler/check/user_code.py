"""What a user's Python file defines, read with ast (never imported at compile time): a path and a top-level name in;
facts about that definition out."""

from __future__ import annotations

import ast
from pathlib import Path


def yields(path: Path, name: str) -> bool | None:
    """Whether top-level function `name` of the file is a generator (a `yield` in its own body, not in a function
    nested in it); None when the file does not parse, defines no such function (the data pass says why) or binds the
    name otherwise (an alias: known only at run time)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:  # the last top-level binding of the name is the one Python keeps
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = any(isinstance(inner, (ast.Yield, ast.YieldFrom)) for inner in _own_nodes(node))
        elif isinstance(node, ast.AsyncFunctionDef) and node.name == name:
            found = False  # a coroutine: it returns (awaits) one result, never a score a sample
        elif _binds(node, name):
            found = None  # an alias or an import: what it is shows only at run time (the script checks it there)
    return found


def _binds(node: ast.stmt, name: str) -> bool:
    """A top-level statement that binds `name` other than a def (an assignment, an import, a class)."""
    if isinstance(node, ast.ClassDef):
        return node.name == name
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == name for t in targets)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return False


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
