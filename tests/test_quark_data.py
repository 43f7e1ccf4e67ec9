"""qas's data about Quark equals the installed amd-quark: presets, grammar, and the space arithmetic."""

from __future__ import annotations

import copy
import inspect
import json

import pytest

from compiler.check.presets import PRESET_NAMES, preset_config
from compiler.check.spacemath import count_configs, quark_discrete_size, stage1_space
from compiler.commands.pipeline import compile_spec
from compiler.resources import load_data

from .conftest import REPO, needs_quark

# Imports amd-quark, so torch and Quark's custom ops: inside the tests, never at collection.
pytestmark = [pytest.mark.e2e, needs_quark]


def _json_equal(a, b) -> bool:
    return json.dumps(a) == json.dumps(b)  # same values and same key order


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_presets_equal_installed_quark(name: str) -> None:
    from quark.onnx.quantization.auto_search import get_auto_search_config

    installed = copy.deepcopy(get_auto_search_config(name))
    assert _json_equal(preset_config(name), installed)


def test_the_preset_list_is_complete() -> None:
    from quark.onnx.quantization.auto_search import qconfig_mapping

    assert set(PRESET_NAMES) == set(qconfig_mapping.AUTO_SEARCH_CONFIGS)


def test_grammar_equals_installed_quark() -> None:
    from quark.onnx.quantization.auto_search import qconfig_mapping
    from quark.onnx.quantization.config import spec
    from quark.onnx.quantization.config.algorithm import AdaQuantConfig, AdaRoundConfig, CLEConfig
    from quark.onnx.quantization.config.maps import QCONFIG_ALL_PARAMS

    def params(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs")]

    g = load_data("quark_grammar.json")
    assert g["qconfig_params"] == sorted(QCONFIG_ALL_PARAMS)
    assert g["spec_classes"] == list(qconfig_mapping.ONNX_ACTIVATION_WEIGHT)
    assert all(params(c) == g["spec_params"] for c in qconfig_mapping.ONNX_ACTIVATION_WEIGHT.values())
    assert g["calibration_methods"] == list(qconfig_mapping.ONNX_CALIBMETHOD)
    assert g["scale_types"] == list(qconfig_mapping.SCALE_TYPE)
    assert g["granularities"] == list(qconfig_mapping.QUANT_GRANULARITY)
    assert g["data_types"] == list(qconfig_mapping.DATA_TYPE)
    assert g["adaround_params"] == params(AdaRoundConfig)
    assert g["adaquant_params"] == params(AdaQuantConfig)
    assert g["cle_params"] == params(CLEConfig)
    assert set(g["algorithms"]) | {"cle"} == set(qconfig_mapping.ONNX_ALGORITHM)
    del spec


def _spaces() -> list[dict]:
    spaces = [preset_config(n)["search_space"] for n in PRESET_NAMES]
    for case in sorted((REPO / "golden").glob("*/expected/quant_plan.json")):
        spaces.append(json.loads(case.read_text())["settings"]["search_space"])
    return spaces


@pytest.mark.parametrize("index", range(len(_spaces())))
def test_space_arithmetic_matches_quark(index: int) -> None:
    from quark.onnx.quantization.auto_search.config_generator import generate_all_configs
    from quark.onnx.quantization.auto_search.utils import validate_search_space

    space = _spaces()[index]
    assert quark_discrete_size(space) == validate_search_space(copy.deepcopy(space))["discrete_space_size"]
    grid = stage1_space(space)
    try:
        expected = len(generate_all_configs(copy.deepcopy(grid)))
    except ValueError:
        pytest.skip("not a list-only space")
    assert count_configs(grid) == expected


def test_preset_sizes_match_the_facts_table() -> None:
    sizes = {n: (quark_discrete_size(preset_config(n)["search_space"]),
                 count_configs(stage1_space(preset_config(n)["search_space"]))) for n in PRESET_NAMES}
    assert sizes == {"ADVANCED_SEARCH": (96, 36), "XINT8_SEARCH": (8, 3), "A8W8_SEARCH": (96, 36),
                     "A16W8_SEARCH": (32, 12)}


def test_compiled_space_is_accepted_by_quarks_grid_for_grid_specs() -> None:
    from quark.onnx.quantization.auto_search.config_generator import generate_all_configs

    result = compile_spec(REPO / "golden" / "grid_sampler" / "spec.yaml")
    configs = generate_all_configs(copy.deepcopy(result.plan.settings.search_space))
    assert len(configs) == result.plan.budget.effective_trials == 9
