"""Files the search writes: a path and JSON-ready data in; the file replaced atomically out."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON via a temporary sibling, so a reader never sees half a file."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(temp, path)
