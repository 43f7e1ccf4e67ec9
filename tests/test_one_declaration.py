"""A spec key is declared once a layer: the schema's property, the Spec dataclass field of the same name (its default
there), and, for a value the script reads unchanged, the Settings field that names its spec path."""

from __future__ import annotations

import dataclasses
import json

import pytest

from compiler.commands.pipeline import compile_spec
from compiler.front import model
from compiler.runtime.settings import Settings

from .conftest import REPO

SCHEMA = json.loads((REPO / "schemas" / "spec.schema.json").read_text(encoding="utf-8"))
SECTIONS = {"search": model.SearchSpec, "output": model.OutputSpec, "evaluation": model.EvaluationSpec,
            "keep_float": model.KeepFloatSpec}


def schema_keys(section: str) -> set[str]:
    """A top-level section of the spec's schema in; the keys it allows out (following one $ref)."""
    node = SCHEMA["properties"][section]
    if "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return set(node["properties"])


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_each_key_of_a_section_is_a_field_of_its_dataclass(section: str) -> None:
    fields = {f.name for f in dataclasses.fields(SECTIONS[section])} - {"path"}
    assert schema_keys(section) == fields  # a key the dataclass lacks would be dropped without a word


def test_a_value_read_as_written_names_a_path_of_the_spec() -> None:
    copied = {f.name: f.metadata["spec"] for f in dataclasses.fields(Settings) if "spec" in f.metadata}
    assert copied["prune"] == "search.prune" and copied["keep_models"] == "output.keep_models"
    for path in copied.values():
        section, _, key = path.rpartition(".")
        if section:
            assert key in schema_keys(section), path
        else:
            assert key in SCHEMA["properties"], path


def test_the_compiled_record_holds_the_values_as_written(example_copy) -> None:
    spec = example_copy / "spec.yaml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("  seed: 0\n", "  seed: 7\n  prune: wilcoxon\n").replace(
        "output:\n", "output:\n  keep_models: top-2\n  plots: true\n"), encoding="utf-8")
    result = compile_spec(spec)
    assert result.ok, result.diagnostics
    settings = result.plan.settings
    written = {"device": "cpu", "sampler": "TPE", "seed": 7, "prune": "wilcoxon", "keep_models": "top-2",
               "plots": True, "resume": True}
    assert {f.name for f in dataclasses.fields(Settings) if "spec" in f.metadata} == set(written)
    assert {name: getattr(settings, name) for name in written} == written
