"""run_manifest.yaml's schema is checked against the record its values come from: each manifest key the template
fills straight from a Settings field allows exactly the JSON types of that field's annotation."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from compiler.runtime.settings import Settings

from .conftest import REPO

TEMPLATE = (REPO / "templates" / "run_manifest.yaml.j2").read_text(encoding="utf-8")
SCHEMA = json.loads((REPO / "schemas" / "run_manifest.schema.json").read_text(encoding="utf-8"))
JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "None": "null",
              "dict": "object", "list": "array"}
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<item>- )?(?P<key>[a-z_0-9]+):(?P<rest>.*)$")
ITEM = "[]"  # a list item in a key path
FROM_SETTINGS = re.compile(r"^ \{\{ settings\.(?P<field>[a-z_]+) \| y \}\}$")


def settings_keys() -> dict[tuple[str, ...], str]:
    """The manifest template in; each key path whose value is `{{ settings.FIELD | y }}` -> FIELD out."""
    found: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    for line in TEMPLATE.splitlines():
        match = KEY_LINE.match(line)
        if match is None:
            continue
        indent = len(match["indent"])
        item = [(indent, ITEM)] if match["item"] else []
        indent += len(match["item"] or "")
        stack = [(i, k) for i, k in stack if i < indent - len(match["item"] or "")] + item + [(indent, match["key"])]
        value = FROM_SETTINGS.match(match["rest"])
        if value is not None:
            found[tuple(k for _, k in stack)] = value["field"]
    return found


def annotation_types(name: str) -> set[str]:
    """A Settings field's name in; the JSON types its annotation admits out (`float | None` -> number, null)."""
    annotation = Settings.__dataclass_fields__[name].type
    types = {JSON_TYPES[part.strip().split("[", 1)[0]] for part in annotation.split("|")}
    return types | {"integer"} if "number" in types else types  # JSON numbers include integers


def schema_node(path: tuple[str, ...]) -> dict:
    """A key path of the manifest in; its schema (references followed) out."""
    node = SCHEMA
    for key in path:
        node = node["items"] if key == ITEM else node["properties"][key]
        while "$ref" in node:
            node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def schema_types(node: dict) -> set[str]:
    """A schema node in; the JSON types it allows out (from type, or from the values of enum / const)."""
    if "type" in node:
        types = {node["type"]} if isinstance(node["type"], str) else set(node["type"])
        return types | {"integer"} if "number" in types else types
    values = node["enum"] if "enum" in node else [node["const"]]
    names = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
    return {names[type(v)] for v in values}


KEYS = settings_keys()


def test_the_template_fills_many_keys_from_the_record() -> None:
    assert KEYS[("search", "seed")] == "seed" and KEYS[("budget", "trial_timeout_s")] == "trial_timeout"
    assert KEYS[("checkpoints", ITEM, "path")] == "study_db" and KEYS[("outputs", "study", "name")] == "study_name"
    assert len(KEYS) >= 15
    assert set(KEYS.values()) <= {f.name for f in dataclasses.fields(Settings)}


@pytest.mark.parametrize("path", sorted(KEYS), ids=".".join)
def test_the_schema_allows_what_the_record_holds(path: tuple[str, ...]) -> None:
    assert schema_types(schema_node(path)) == annotation_types(KEYS[path])
