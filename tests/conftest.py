"""Shared test fixtures: the --update-golden flag, paths, and a compile-to-memory helper."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = REPO / "specs" / "example"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden/*/expected from the compiler")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of specs/example (spec, model, samples; no outputs) to compile and run in."""
    target = tmp_path / "example"
    shutil.copytree(EXAMPLE_DIR, target, ignore=shutil.ignore_patterns("autosearch_output", "__pycache__"))
    return target
