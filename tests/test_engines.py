"""Engines as objects: each engine in, what it supports (and why not), its runner and its default storage out; the
passes ask the engine, and every refusal reaches the user as QAS326 with the engine's own reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.check.engine_support import refused
from compiler.front import model, source
from compiler.runtime import contract
from compiler.runtime.contract import ENGINES, FEATURES, SETTING_FEATURES, engines_supporting
from compiler.runtime.settings import Settings

from .conftest import EXAMPLE_DIR


def test_every_refusal_names_a_feature_and_says_why() -> None:
    for engine in ENGINES.values():
        assert set(engine.refusals) <= set(FEATURES), engine
        assert all(reason.strip() for reason in engine.refusals.values())
        assert engine.storages and engine.writes and engine.entry
    assert all(ENGINES["qas"].supports(f) for f in FEATURES)
    assert not any(ENGINES["autosearchpro"].supports(f) for f in FEATURES)
    assert engines_supporting("workers") == "qas"


def test_an_unknown_feature_is_a_bug_not_a_no() -> None:
    with pytest.raises(KeyError, match="unknown engine feature"):
        ENGINES["qas"].supports("workerz")


def test_each_engine_dependent_setting_names_a_feature_and_a_field() -> None:
    fields = Settings.__dataclass_fields__
    assert set(SETTING_FEATURES) <= set(fields) and set(SETTING_FEATURES.values()) <= set(FEATURES)


def test_each_engine_runs_its_own_module(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    class Module:
        @staticmethod
        def main(settings: object, role: object) -> int:
            seen.append((settings, role))
            return 7

    monkeypatch.setattr(contract.importlib, "import_module", lambda name, package: Module)
    assert ENGINES["autosearchpro"].run("settings", "role") == 7 and seen == [("settings", "role")]


def spec_of(path: Path) -> model.Spec:
    """A spec file in; its typed Spec (no pass run) out."""
    doc, found = source.load(path)
    assert doc is not None, found
    return model.build(doc.data, path, doc.text)


@pytest.mark.parametrize("feature, what", [("trial_timeout", "trial_timeout"), ("launch", "output.launch")])
def test_the_refusal_carries_the_engine_s_reason(example_copy: Path, feature: str, what: str) -> None:
    spec_file = example_copy / "spec.yaml"
    spec_file.write_text(spec_file.read_text().replace("search:\n", "search:\n  engine: autosearchpro\n", 1))
    found = refused(spec_of(spec_file), feature, what, ("search",))
    assert found is not None and found.code == "QAS326"
    assert found.message == f"{what} needs engine qas: {ENGINES['autosearchpro'].why_not(feature)}"
    assert refused(spec_of(EXAMPLE_DIR / "spec.yaml"), feature, what, ("search",)) is None  # engine qas: offered
