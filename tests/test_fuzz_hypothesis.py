"""Property-based fuzzing with hypothesis: any document, and any mutation of a valid spec, gives exit 0 or 1 with
JSON diagnostics from `qas compile --format json` (never exit 3, never a traceback) and writes nothing on an error.

Derandomized and bounded, so CI runs the same examples every time; raise QAS_FUZZ_EXAMPLES to search longer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from typer.testing import CliRunner

from compiler.commands.cli import app

from .conftest import EXAMPLE_DIR, REPO

EXAMPLES = int(os.environ.get("QAS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TOP_KEYS = ["qas", "name", "model", "calibration", "evaluation", "search", "device", "output", "keep_float"]
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-10**30, max_value=10**30)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["Int8Spec", "XINT8_SEARCH", "cpu", "cuda:0", "L2", "cos", "TPE", "Grid", "only_if",
                              "data/calib", "../x", "models/tinycnn.onnx", "a\x00b", "10m"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=10) | st.sampled_from(TOP_KEYS), inner, max_size=4),
                      max_leaves=10)


def base_spec() -> dict[str, Any]:
    data = YAML(typ="safe").load((EXAMPLE_DIR / "spec.yaml").read_text())
    data["model"] = str(EXAMPLE_DIR / "models" / "tinycnn.onnx")
    data["calibration"]["folder"] = str(EXAMPLE_DIR / "data" / "calib")
    data["evaluation"]["data"]["folder"] = str(EXAMPLE_DIR / "data" / "eval")
    return data


def paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*path, i))
    return found


def compile_json(folder: Path, document: Any) -> None:
    """Write the document as a spec (JSON text is YAML), compile it in-process; check the contract of the outcome."""
    spec = folder / "spec.yaml"
    spec.write_text(json.dumps(document, allow_nan=True))
    out = folder / "autosearch_output"
    ran = CliRunner().invoke(app, ["compile", "--format", "json",
                                   "--target-env", str(REPO / "golden" / "target_env.json"), str(spec)])
    assert ran.exit_code in (0, 1), (ran.exit_code, ran.output[-2000:], document)
    assert "Traceback" not in ran.output
    found = json.loads(ran.stdout)
    assert found["ok"] is (ran.exit_code == 0)
    if ran.exit_code == 1:
        assert any(d["severity"] == "error" for d in found["diagnostics"])
        assert not out.exists(), "an error wrote files"


@FUZZ
@given(document=st.dictionaries(st.sampled_from(TOP_KEYS) | st.text(max_size=8), VALUES, max_size=8))
def test_any_document_is_diagnosed_never_crashes_and_writes_nothing_on_an_error(tmp_path_factory: Any,
                                                                                  document: dict) -> None:
    compile_json(tmp_path_factory.mktemp("doc"), document)


@FUZZ
@given(data=st.data())
def test_any_mutation_of_a_valid_spec_is_diagnosed_never_crashes(tmp_path_factory: Any, data: st.DataObject) -> None:
    document = base_spec()
    for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="mutations")):
        path = data.draw(st.sampled_from([p for p in paths(document) if p]), label="path")
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and data.draw(st.booleans(), label="rename or delete"):
            value = parent.pop(path[-1])
            if data.draw(st.booleans(), label="rename"):
                parent[data.draw(st.text(max_size=12), label="new key")] = value
        else:
            parent[path[-1]] = data.draw(VALUES, label="new value")
    compile_json(tmp_path_factory.mktemp("mutated"), document)
