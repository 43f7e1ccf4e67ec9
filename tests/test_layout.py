"""The test suite's own layout: shared helpers live in conftest.py; no test module imports another one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TEST_MODULES = sorted(p.stem for p in TESTS.glob("test_*.py"))


def imported_test_modules(tree: ast.AST, test_modules: set[str]) -> list[str]:
    """The test modules an import anywhere in tree names: relative (.test_x), via the package (tests.test_x) or bare."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []  # `from . import x` has no module
            if node.level == 0 and base[0] not in {"tests", *test_modules}:
                continue  # an import from some other package: its names are not our modules
            dotted = [base + [alias.name] for alias in node.names]
        else:
            continue
        for parts in dotted:
            if parts[:1] == ["tests"]:
                parts = parts[1:]
            if parts and parts[0] in test_modules:
                found.append(parts[0])
    return found


@pytest.mark.parametrize("source, expected", [
    ("from .conftest import REPO, qas", []),
    ("from .test_cli import qas", ["test_cli"]),
    ("from . import test_cli", ["test_cli"]),
    ("from tests.test_golden import target_env", ["test_golden"]),
    ("from tests import conftest, test_golden", ["test_golden"]),
    ("import tests.test_e2e", ["test_e2e"]),
    ("import test_e2e", ["test_e2e"]),
    ("def helper():\n    from .test_e2e import run_script\n", ["test_e2e"]),
    ("from compiler.test_cli import x", []),
    ("from compiler import test_cli", []),
])
def test_the_import_check_sees_every_spelling(source: str, expected: list[str]) -> None:
    assert imported_test_modules(ast.parse(source), {"test_cli", "test_golden", "test_e2e"}) == expected


def test_no_test_module_imports_another() -> None:
    assert "test_layout" in TEST_MODULES  # the glob found the suite
    offenders = {}
    for name in TEST_MODULES:
        tree = ast.parse((TESTS / f"{name}.py").read_text(encoding="utf-8"), filename=f"{name}.py")
        if imported := imported_test_modules(tree, set(TEST_MODULES)):
            offenders[name] = imported
    assert not offenders, f"move shared helpers into tests/conftest.py; these test modules import others: {offenders}"
