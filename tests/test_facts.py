"""Facts derived once: derive() on the example gives the known facts (tests/test_stages.py keeps passes out of their
readers)."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import pytest

from compiler.back.facts import Facts, canonical_hash, derive
from compiler.back.script_settings import build_settings
from compiler.front import model, source
from compiler.resources import load_schema
from compiler.runtime.contract import DEFAULT_ENGINE, DEFAULT_MAX_FAILURES, ENGINES, STUDY_HASH_CHARS

from .conftest import EXAMPLE_DIR


def example_spec(**search: Any) -> model.Spec:
    """specs/example/spec.yaml as a Spec (no pass run), with `search` keys replaced."""
    doc, found = source.load(EXAMPLE_DIR / "spec.yaml")
    assert doc is not None, found
    data = copy.deepcopy(doc.data)
    data["search"].update(search)
    return model.build(data, EXAMPLE_DIR / "spec.yaml", doc.text)


def test_derive_on_the_example() -> None:
    facts = derive(example_spec())
    out = EXAMPLE_DIR / "autosearch_output"
    assert facts.engine is ENGINES["qas"]
    assert (facts.two_stage, facts.torch_device, facts.direction) == (True, "cpu", "minimize")
    assert facts.space_hash == canonical_hash(facts.space)
    assert facts.study_name == f"tinycnn-{facts.space_hash[:STUDY_HASH_CHARS]}"
    assert (facts.study_file, facts.script_file) == ("tinycnn_study.journal", "tinycnn_autosearch.py")
    settings = build_settings(example_spec(), facts)  # what only the script reads is derived there
    assert (settings.max_failures, settings.workers, settings.storage) == (DEFAULT_MAX_FAILURES, 1, {"kind": "journal"})
    assert facts.model == EXAMPLE_DIR / "models" / "tinycnn.onnx" and facts.external_data is None
    assert (facts.output_dir, settings.temp_dir) == (out, "tmp")
    assert facts.calibration.path == EXAMPLE_DIR / "data" / "calib"
    assert facts.eval_data is not None and facts.eval_data.path == EXAMPLE_DIR / "data" / "eval"
    assert facts.evaluator is None
    assert facts.samples == {"calibration": 8, "evaluation": 4}
    assert [i["name"] for i in facts.analysis["inputs"]] == ["input"]
    b = facts.budget
    assert (b.requested_trials, b.effective_trials, b.grid_configs, b.models_produced) == (3, 3, 3, 6)
    assert math.isinf(b.distinct_configs) and b.dump_bytes == 0  # engine qas scores in memory
    for group in ("adaround_params", "adaquant_params"):  # the declared device is set everywhere
        assert facts.space[group]["optim_device"] == facts.space[group]["infer_device"] == ["cpu"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.two_stage = False  # type: ignore[misc]


def test_derive_follows_the_engine_record_and_the_written_values() -> None:
    spec = example_spec(engine="autosearchpro", max_failures=2, two_stage=False)
    facts: Facts = derive(spec)
    assert facts.engine is ENGINES["autosearchpro"]
    assert facts.study_name == "tinycnn"  # no space hash in the name
    assert facts.two_stage is False
    # the engine ends the search at its first failure: the setting stays at its default (the passes refuse it)
    assert build_settings(spec, facts).max_failures == DEFAULT_MAX_FAILURES
    assert facts.budget.grid_configs == 0


def test_schema_defaults_are_the_contract_defaults() -> None:
    search = load_schema("spec.schema.json")["properties"]["search"]["properties"]
    assert search["max_failures"]["default"] == DEFAULT_MAX_FAILURES
    assert search["engine"]["default"] == DEFAULT_ENGINE == model.SearchSpec.__dataclass_fields__["engine"].default
    assert sorted(search["engine"]["enum"]) == sorted(ENGINES)
