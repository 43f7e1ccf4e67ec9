"""The package's stage folders: every module of compiler/ in, its stage out; no import climbs back up a stage, the
passes and the back end do not know each other, and no two modules share a name."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE = REPO / "compiler"
SHARED = {"compiler", "compiler.codes", "compiler.diagnostics", "compiler.resources", "compiler.secret_text",
          "compiler.durations"}
# What each stage may import besides itself. The runtime is the ground floor (the script runs it without the
# compiler); commands sit on top and may use anything.
MAY_IMPORT = {
    "runtime": set(),
    "shared": {"runtime"},
    "front": {"runtime", "shared"},
    "check": {"runtime", "shared", "front"},
    "passes": {"runtime", "shared", "front", "check"},
    "back": {"runtime", "shared", "front", "check"},
    "report": {"runtime", "shared", "front", "check", "back"},
    "commands": {"runtime", "shared", "front", "check", "passes", "back", "report"},
}


def modules() -> dict[str, Path]:
    """Every module of the package: its dotted name in, its file out (a package is its __init__.py)."""
    found = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        parts = file.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return found


def stage(name: str) -> str:
    """A module's dotted name in, its stage out."""
    if name in SHARED or name == "compiler.__main__":
        return "shared" if name != "compiler.__main__" else "commands"
    parts = name.split(".")
    if parts[1:3] == ["check", "passes"]:
        return "passes"
    return parts[1]


def imports(name: str, file: Path) -> set[str]:
    """The compiler modules a file imports, at any depth of the file, as absolute dotted names."""
    package = name.split(".") if file.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: climb from the file's package
                parent = ".".join(package[:len(package) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from compiler.front import model`
    known = modules()
    return {m for m in found if m in known}


def test_every_module_has_a_stage() -> None:
    stages = {name: stage(name) for name in modules()}
    assert set(stages.values()) <= set(MAY_IMPORT), stages
    assert stages["compiler.check.passes.budget"] == "passes" and stages["compiler.check.budget_facts"] == "check"


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_import_climbs_a_stage(name: str) -> None:
    own = stage(name)
    wrong = sorted(m for m in imports(name, modules()[name]) if stage(m) != own and stage(m) not in MAY_IMPORT[own])
    assert wrong == [], f"{name} ({own}) imports {[(m, stage(m)) for m in wrong]}"


def test_the_check_sees_an_import_that_climbs(tmp_path: Path) -> None:
    file = tmp_path / "lower.py"
    file.write_text("from compiler.check.passes import space_grammar\nfrom ..commands import run\n", encoding="utf-8")
    found = imports("compiler.back.lower", file)
    assert found == {"compiler.check.passes", "compiler.check.passes.space_grammar", "compiler.commands",
                     "compiler.commands.run"}
    assert {stage(m) for m in found} - MAY_IMPORT["back"] == {"passes", "commands"}


def test_no_two_modules_share_a_name() -> None:
    names = Counter(file.stem for file in PACKAGE.rglob("*.py") if file.stem != "__init__")
    assert [name for name, count in names.items() if count > 1] == []
