"""The report's reading of run_manifest.yaml: the file's path in; its data out once the keys the report reads
check out, or a one-line error.

ruamel and jsonschema are imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_INT = {"type": "integer", "minimum": 0}
_MANIFEST_SCHEMA = {  # only the keys the report reads; anything else in the manifest is ignored
    "type": "object",
    "required": ["name", "engine", "search", "budget", "outputs"],
    "properties": {
        "name": {"type": "string"},
        "engine": {"type": "string"},
        "search": {"type": "object", "required": ["direction"],
                   "properties": {"direction": {"enum": ["minimize", "maximize"]}}},
        "budget": {"type": "object", "required": ["effective_trials", "grid_configs"],
                   "properties": {"effective_trials": _INT, "grid_configs": _INT, "models_produced": _INT}},
        "outputs": {"type": "object", "required": ["study"], "properties": {
            "best_config": {"type": "string", "minLength": 1},
            "study": {"type": "object", "required": ["db", "name"],
                      "properties": {"db": {"type": "string", "minLength": 1}, "name": {"type": "string"},
                                     "grid_name": {"type": "string"}}}}},
    },
}


def load_manifest(path: Path) -> dict[str, Any] | str:
    """run_manifest.yaml in; its data out once the keys the report reads check out, or an error line."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match
    from ruamel.yaml import YAML, YAMLError

    if not path.is_file():
        return f"no {path.name} in {path.parent} (is this a qas output dir?)"
    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        return f"cannot read {path}: {first_line(exc)}"
    error = best_match(Draft202012Validator(_MANIFEST_SCHEMA).iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        return f"{path}: {where + ': ' if where else ''}{error.message}"
    return data


def first_line(exc: object) -> str:
    """An exception (or any text) in; its first line out, or its type's name when it has no text."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
