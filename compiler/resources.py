"""Where the packaged data lives: a resource name in, a path out (repo checkout or installed wheel)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_root(name: str) -> Path:
    # In a wheel, schemas/ and templates/ are placed inside the package as _data/<name>;
    # in a source checkout (editable install) they sit at the repository top level.
    packaged = _PACKAGE_DIR / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE_DIR.parent / name


def schemas_dir() -> Path:
    return _data_root("schemas")


def templates_dir() -> Path:
    return _data_root("templates")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Schema file name in (e.g. 'spec.schema.json'), parsed JSON out."""
    return json.loads((schemas_dir() / name).read_text(encoding="utf-8"))


@cache
def load_data(name: str) -> Any:
    """Data file inside compiler/data (e.g. 'presets.json') in, parsed JSON out."""
    return json.loads((_PACKAGE_DIR / "data" / name).read_text(encoding="utf-8"))


def runtime_files() -> list[Path]:
    """The runtime package's modules (compiler/runtime/*.py), in name order: what compile copies beside a script."""
    return sorted((_PACKAGE_DIR / "runtime").glob("*.py"))
