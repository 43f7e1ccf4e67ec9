"""The test suite's own layout: shared helpers live in conftest.py; no test module imports another one; every test
that runs amd-quark carries the `e2e` marker."""

from __future__ import annotations

import ast
import tomllib
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
            dotted = [[*base, alias.name] for alias in node.names]
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


# What runs amd-quark: importing it (importorskip included), conftest's marker that skips without it, and conftest's
# helpers that run a compiled search script. A test that uses one, itself, through a helper or fixture of its module,
# or at its module's top level, carries the `e2e` marker, so `pytest -m "not e2e"` runs no Quark.
QUARK_NAMES = {"needs_quark", "run_script", "compile_and_run"}
SLOW_WITHOUT_QUARK = {"test_wheel"}  # builds and installs a wheel: e2e too, though it runs no search


def _is_quark_module(name: object) -> bool:
    return isinstance(name, str) and name.split(".")[0] == "quark"


def uses_quark(node: ast.AST, helpers: set[str]) -> bool:
    """True when node (a function, or a module-level statement) imports quark or names one of helpers."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import) and any(_is_quark_module(alias.name) for alias in sub.names):
            return True
        if isinstance(sub, ast.ImportFrom) and sub.level == 0 and _is_quark_module(sub.module):
            return True
        if isinstance(sub, ast.Call) and getattr(sub.func, "attr", getattr(sub.func, "id", None)) == "importorskip" \
                and sub.args and isinstance(sub.args[0], ast.Constant) and _is_quark_module(sub.args[0].value):
            return True
        if ((isinstance(sub, ast.Name) and sub.id in helpers)
                or (isinstance(sub, ast.Attribute) and sub.attr in helpers)):
            return True
        if isinstance(sub, ast.arguments) and {a.arg for a in sub.args + sub.kwonlyargs} & helpers:  # a fixture
            return True
    return False


def _names_e2e(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.attr == "e2e" and getattr(sub.value, "attr", None) == "mark"
               for sub in ast.walk(node))


def unmarked_quark_tests(tree: ast.Module) -> list[str]:
    """A test module's tree in; its tests that run Quark without the e2e marker out ("<module>" for its top level)."""
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers = set(QUARK_NAMES)
    while grown := {f.name for f in functions if not f.name.startswith("test_") and f.name not in helpers
                    and uses_quark(f, helpers)}:
        helpers |= grown
    module_marked = any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)
                        and _names_e2e(n.value) for n in tree.body)
    if module_marked:
        return []
    found = ["<module>"] if any(uses_quark(n, helpers) for n in tree.body if n not in functions) else []
    return found + [f.name for f in functions if f.name.startswith("test_") and uses_quark(f, helpers)
                    and not any(_names_e2e(d) for d in f.decorator_list)]


@pytest.mark.parametrize("source, expected", [
    ("def test_a():\n    pass\n", []),
    ("import pytest\npytest.importorskip('quark.onnx')\ndef test_a():\n    pass\n", ["<module>"]),
    ("import pytest\npytest.importorskip('quark.onnx')\npytestmark = pytest.mark.e2e\n", []),
    ("pytestmark = [pytest.mark.e2e, needs_quark]\ndef test_a():\n    run_script(s)\n", []),
    ("def test_a():\n    pytest.importorskip('quark.onnx')\n", ["test_a"]),
    ("def test_a():\n    pytest.importorskip('onnxruntime.quantization')\n", []),
    ("@pytest.mark.e2e\ndef test_a():\n    pytest.importorskip('quark.onnx')\n", []),
    ("@needs_quark\ndef test_a():\n    pass\n", ["test_a"]),
    ("@pytest.mark.e2e\n@needs_quark\ndef test_a():\n    pass\n", []),
    ("def test_a():\n    from quark.onnx import x\n", ["test_a"]),
    ("def test_a():\n    import quark.onnx\n", ["test_a"]),
    ("def test_a(p):\n    out, ran = compile_and_run(p)\n", ["test_a"]),
    ("def test_a(p):\n    conftest.run_script(p)\n", ["test_a"]),
    ("def go(p):\n    return run_script(p)\ndef twice(p):\n    go(p)\ndef test_a(p):\n    twice(p)\n", ["test_a"]),
    ("@pytest.fixture\ndef ran(p):\n    return compile_and_run(p)\ndef test_a(ran):\n    pass\n", ["test_a"]),
    ("from .conftest import needs_quark, run_script\ndef test_a():\n    pass\n", []),
])
def test_the_e2e_check_sees_every_way_to_run_quark(source: str, expected: list[str]) -> None:
    assert unmarked_quark_tests(ast.parse(source)) == expected


def test_every_test_that_runs_quark_is_marked_e2e() -> None:
    offenders, marked_modules = {}, set()
    for name in TEST_MODULES:
        tree = ast.parse((TESTS / f"{name}.py").read_text(encoding="utf-8"), filename=f"{name}.py")
        if found := unmarked_quark_tests(tree):
            offenders[name] = found
        if any(isinstance(n, ast.Assign) and _names_e2e(n.value) for n in tree.body):
            marked_modules.add(name)
    assert not offenders, f"mark these with @pytest.mark.e2e (or the module with pytestmark): {offenders}"
    assert {"test_e2e", "test_e2e_presets", "test_quark_data"} | SLOW_WITHOUT_QUARK <= marked_modules
    pyproject = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]
    assert any(m.startswith("e2e:") for m in pyproject["ini_options"]["markers"])
