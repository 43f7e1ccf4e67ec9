"""Compiled outputs: manifests validate against both schemas, scripts parse, and the same spec gives the same bytes."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from compiler.back.render import script_is_hand_edited
from compiler.commands.pipeline import compile_spec
from compiler.resources import load_schema
from compiler.runtime.contract import RUNTIME_PACKAGE

from .conftest import EXAMPLE_DIR, REPO, settings_from_script, target_env

OK_CASES = sorted(p.parent.parent.name for p in (REPO / "golden").glob("*/expected/run_manifest.yaml"))


def quark_manifest_contract() -> dict:
    import importlib.util

    root = Path(importlib.util.find_spec("quark").submodule_search_locations[0])
    path = root / "_bundled_skills" / "quark-torch-ptq" / "references" / "contracts" / "run_manifest.schema.json"
    if not path.is_file():
        pytest.skip("this amd-quark ships no run_manifest contract")
    return json.loads(path.read_text())


@pytest.mark.parametrize("case", OK_CASES)
def test_manifest_matches_our_schema_and_quarks_contract(case: str) -> None:
    result = compile_spec(REPO / "golden" / case / "spec.yaml", target_env(REPO / "golden" / case))
    manifest = YAML(typ="safe").load(result.files["run_manifest.yaml"])
    jsonschema.validate(manifest, load_schema("run_manifest.schema.json"))
    jsonschema.validate(manifest, quark_manifest_contract())
    plan = json.loads(result.files["quant_plan.json"])
    assert manifest["budget"]["models_produced"] == plan["budget"]["models_produced"]
    assert manifest["budget"]["effective_trials"] == plan["budget"]["effective_trials"]


@pytest.mark.parametrize("case", OK_CASES)
def test_script_parses_and_its_header_hash_matches(case: str) -> None:
    result = compile_spec(REPO / "golden" / case / "spec.yaml", target_env(REPO / "golden" / case))
    script = result.files[result.plan.script]
    ast.parse(script)
    assert not script_is_hand_edited(script)
    assert script_is_hand_edited(script.replace("n_trials=", "n_trials=1 + ", 1))


def test_every_quark_config_key_is_explicit(tmp_path: Path) -> None:
    from compiler.check.presets import preset_config
    from compiler.runtime.engine_autosearchpro import quark_config

    case = REPO / "golden" / "preset_xint8_clamp"  # engine autosearchpro
    result = compile_spec(case / "spec.yaml", target_env(case))
    settings = settings_from_script(result.files[result.plan.script], tmp_path / result.plan.script)
    keys = list(quark_config(settings, calib_reader=None, eval_reader=None))
    assert keys == list(preset_config("XINT8_SEARCH"))  # all 18, in Quark's own order
    assert len(keys) == 18


def test_clamp_case_records_requested_and_effective_budget() -> None:
    result = compile_spec(REPO / "golden" / "preset_xint8_clamp" / "spec.yaml",
                          target_env(REPO / "golden" / "preset_xint8_clamp"))
    b = result.plan.budget
    assert (b.requested_trials, b.effective_trials, b.quark_would_run, b.grid_configs) == (20, 20, 8, 3)
    assert b.models_produced == 23
    assert "    n_trials=20,\n" in result.files[result.plan.script]


def test_device_is_written_into_every_finetune_device_field() -> None:
    result = compile_spec(REPO / "golden" / "override" / "spec.yaml",
                          target_env(REPO / "golden" / "override"))  # rocm:1
    space = result.plan.settings.search_space
    for group in ("adaround_params", "adaquant_params"):
        assert space[group]["optim_device"] == ["cuda:1"]  # torch names ROCm GPUs cuda
        assert space[group]["infer_device"] == ["cuda:1"]
        assert list(space[group])[-1] == "only_if"
    assert "cuda:0" not in json.dumps(space)


def _compile_in_subprocess(spec: Path, seed: str) -> dict[str, str]:
    code = ("import json,sys; from compiler.commands.pipeline import compile_spec; "
            "r = compile_spec(__import__('pathlib').Path(sys.argv[1])); print(json.dumps(r.files))")
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, "-c", code, str(spec)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("case", ["preset_advanced", "custom_space", "hostile_strings"])
def test_same_spec_same_bytes_across_hash_seeds(case: str) -> None:
    spec = REPO / "golden" / case / "spec.yaml"
    first = _compile_in_subprocess(spec, "0")
    assert first == _compile_in_subprocess(spec, "1")
    assert first == compile_spec(spec).files


def test_compile_never_imports_torch_or_quark() -> None:
    code = ("import sys; from compiler.commands.pipeline import compile_spec; "
            f"compile_spec(__import__('pathlib').Path({str(EXAMPLE_DIR / 'spec.yaml')!r})); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'quark', 'onnxruntime', 'optuna')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_committed_example_outputs_are_up_to_date() -> None:
    # run_manifest.yaml records the environment compile checked against, so it is not committed
    # (see .gitignore), nor is the runtime copy (tests/test_runtime_copy.py pins it); every other output
    # is, and must match a fresh compile byte for byte.
    result = compile_spec(EXAMPLE_DIR / "spec.yaml")
    committed = EXAMPLE_DIR / "autosearch_output"
    stale = [name for name, text in result.files.items()
             if name != "run_manifest.yaml" and not name.startswith(RUNTIME_PACKAGE + "/")
             and (committed / name).read_text(encoding="utf-8") != text]
    assert not stale, f"run `qas compile specs/example/spec.yaml`: stale {stale}"
