"""One declaration per compiled setting: the runtime's Settings is built by compile (back/script_settings.py), written
into the script field by field (defaults left out) and into quant_plan.json; reading either back gives the record."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from compiler.back.script_settings import default, non_default
from compiler.commands.pipeline import Result, compile_spec
from compiler.commands.run import total_trials
from compiler.runtime.contract import ENGINES
from compiler.runtime.settings import Settings

from .conftest import EXAMPLE_DIR, REPO, target_env

COMPILED_CASES = sorted(p.parent.name for p in (REPO / "golden").glob("*/spec.yaml")
                        if not p.parent.name.startswith("err_"))


def compiled_case(case: str) -> Result:
    """A golden case that compiles (no err_ case) in; its compile result out."""
    result = compile_spec(REPO / "golden" / case / "spec.yaml", target_env(REPO / "golden" / case))
    assert result.ok, result.diagnostics
    return result


def script_settings(script: str, name: str) -> Settings:
    """A compiled script's text in; the Settings its `Settings(...)` call makes out (script= its file name)."""
    call = next(node for node in ast.walk(ast.parse(script))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Settings")
    values = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg != "script"}
    return Settings(script=name, **values)


@pytest.mark.parametrize("case", COMPILED_CASES)
def test_the_script_and_quant_plan_hold_the_compiled_record(case: str) -> None:
    result = compiled_case(case)
    settings = result.plan.settings
    assert script_settings(result.files[result.plan.script], settings.script) == settings
    written = json.loads(result.files["quant_plan.json"])["settings"]
    assert Settings(**written) == settings  # the defaults it leaves out are the record's own


def test_a_default_is_left_out_and_a_set_value_is_written(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    text = spec.read_text(encoding="utf-8")
    plain = compile_spec(spec).files["tinycnn_autosearch.py"]
    assert "max_failures=" not in plain and "trial_timeout=" not in plain and "keep_models=" not in plain
    spec.write_text(text.replace("search:\n", "search:\n  max_failures: 2\n  trial_timeout: 90s\n", 1),
                    encoding="utf-8")
    result = compile_spec(spec)
    assert result.ok, result.diagnostics
    script = result.files["tinycnn_autosearch.py"]
    assert "    max_failures=2,\n" in script and "    trial_timeout=90.0,  # seconds; None: no limit\n" in script


def test_an_engine_gets_no_setting_it_does_not_read() -> None:
    result = compile_spec(REPO / "golden" / "custom_evaluator" / "spec.yaml",
                          target_env(REPO / "golden" / "custom_evaluator"))
    settings = result.plan.settings
    assert settings.engine == "autosearchpro"
    unsupported = ENGINES["autosearchpro"].unsupported_settings()
    assert {"max_failures", "trial_timeout", "keep_float", "workers", "stop"} <= set(unsupported)
    assert all(getattr(settings, name) == default(name) for name in unsupported)
    assert not {f.name for f, _ in non_default(settings)} & set(unsupported)


def test_every_setting_either_has_a_default_or_is_always_written() -> None:
    required = [f.name for f in dataclasses.fields(Settings)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    example = compile_spec(EXAMPLE_DIR / "spec.yaml").plan.settings
    assert {f.name for f, _ in non_default(example)} >= set(required)


@pytest.mark.parametrize("case", COMPILED_CASES)
def test_the_search_and_qas_run_count_the_same_trials(case: str) -> None:
    result = compiled_case(case)
    settings = result.plan.settings
    manifest = YAML(typ="safe").load(result.files["run_manifest.yaml"])
    grid, sampled = settings.stage_totals()
    outside = grid if ENGINES[settings.engine].quark_loop and settings.sampler != "Grid" else 0
    assert total_trials(manifest) == grid + sampled - outside


# The run manifest's keys that show a setting: checked against the record, so the manifest and the script cannot
# disagree (engine autosearchpro's max_failures is its own rule: the first failure ends the search).
MANIFEST_SHOWS = {
    ("engine",): "engine", ("spec_sha256",): "spec_hash", ("inputs", "model"): "model",
    ("inputs", "model_sha256"): "model_sha256", ("inputs", "evaluation", "metric"): "metric",
    ("search", "space_sha256"): "space_hash", ("search", "sampler"): "sampler", ("search", "seed"): "seed",
    ("search", "two_stage"): "two_stage", ("search", "direction"): "direction", ("search", "device"): "device",
    ("search", "workers"): "workers", ("budget", "effective_trials"): "n_trials",
    ("budget", "grid_configs"): "grid_configs", ("budget", "trial_timeout_s"): "trial_timeout",
    ("budget", "keep_models"): "keep_models", ("requirements",): "requirements",
    ("outputs", "study", "db"): "study_db", ("outputs", "study", "name"): "study_name",
    ("outputs", "study", "resume"): "resume", ("outputs", "study", "kind"): "storage_kind",
}


@pytest.mark.parametrize("case", COMPILED_CASES)
def test_the_run_manifest_shows_the_record_s_values(case: str) -> None:
    result = compiled_case(case)
    settings = result.plan.settings
    manifest = YAML(typ="safe").load(result.files["run_manifest.yaml"])
    for path, name in MANIFEST_SHOWS.items():
        shown = manifest
        for key in path:
            shown = shown[key]
        assert shown == getattr(settings, name), (path, name)
    assert manifest["budget"]["max_failures"] == ENGINES[settings.engine].failures_allowed(settings)
