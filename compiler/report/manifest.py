"""The report's reading of run_manifest.yaml: the file's path in; its data out once the keys the report reads
check out against the stored schemas/run_manifest.schema.json, or a one-line error.

ruamel and jsonschema are imported inside the functions so `import compiler.report` stays cheap.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from compiler.resources import load_schema

# The keys the report reads: True a required value, False an optional one, a dict a required object. Each is
# checked against its own rule in the stored schema; every other key is left unchecked, so a manifest from an
# older or newer qas (or with a run block) still reports.
READS: dict[str, Any] = {
    "name": True,
    "engine": True,
    "search": {"direction": True, "sampler": False, "device": False},
    "budget": {"effective_trials": True, "grid_configs": True, "models_produced": False},
    "outputs": {"study": {"db": True, "name": True}, "best_config": False},
}


@cache
def manifest_schema() -> dict[str, Any]:
    """The stored schemas/run_manifest.schema.json narrowed to the keys the report reads (READS)."""
    stored = load_schema("run_manifest.schema.json")
    return {"$schema": stored["$schema"], "$defs": stored.get("$defs", {}), **_narrow(stored, stored, READS)}


def _narrow(root: dict[str, Any], node: dict[str, Any], reads: dict[str, Any]) -> dict[str, Any]:
    """An object's schema in; the same object with only the `reads` keys (required as READS says) out."""
    if "$ref" in node:  # "#/$defs/name"
        node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
    rules = node["properties"]
    return {
        "type": "object",
        "required": [key for key, wanted in reads.items() if wanted is not False],
        "properties": {key: _narrow(root, rules[key], wanted) if isinstance(wanted, dict) else rules[key]
                       for key, wanted in reads.items()},
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
    error = best_match(Draft202012Validator(manifest_schema()).iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        return f"{path}: {where + ': ' if where else ''}{error.message}"
    return data


def first_line(exc: object) -> str:
    """An exception (or any text) in; its first line out, or its type's name when it has no text."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
