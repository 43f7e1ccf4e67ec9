"""The sensitivity ranking without amd-quark: blocks (first match wins), aggregation, the searched prefix (top_k and
coverage), and the keep_float parameter in engine qas's loop (part of each config, recorded on trials and the winner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.runtime.results import write_best
from compiler.runtime.search import Search
from compiler.runtime.sensitivity import Ranking, base_config, group_nodes, rank
from compiler.runtime.space import config_key, stage_configs

from .conftest import SPACE, FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)
SCORES = {"conv1": 0.1, "relu1": 0.02, "conv2": 0.5, "relu2": 0.0, "fc": 0.3, "pool": -0.01}


def test_a_node_joins_the_first_block_that_matches_and_unmatched_nodes_are_their_own_group() -> None:
    groups = group_nodes(list(SCORES), {"stem": ["^conv1$", "relu1"], "convs": ["conv"], "late": ["relu"]})
    assert groups == {"stem": ["conv1", "relu1"], "convs": ["conv2"], "late": ["relu2"], "fc": ["fc"], "pool": ["pool"]}


@pytest.mark.parametrize("aggregate, first, score", [("sum", "body", 0.5), ("max", "body", 0.5), ("mean", "fc", 0.3)])
def test_groups_are_ranked_by_their_aggregated_score(aggregate: str, first: str, score: float) -> None:
    ranked = rank(SCORES, {"body": ["conv2", "relu2"]}, aggregate)
    assert (ranked[0]["name"], ranked[0]["score"]) == (first, pytest.approx(score))
    assert [g["name"] for g in ranked][-1] == "pool"


def test_the_prefix_is_the_top_k_or_the_fewest_groups_covering_the_fraction() -> None:
    ranking = Ranking(rank(SCORES, {}, "sum"))  # conv2 .5, fc .3, conv1 .1, relu1 .02, relu2 0, pool -.01
    assert ranking.float_nodes({"top_k": 2})["nodes"] == ["conv2", "fc"]
    assert ranking.float_nodes({"top_k": 0})["nodes"] == []
    assert ranking.float_nodes({"coverage": 0.0})["groups"] == []
    assert ranking.float_nodes({"coverage": 0.5})["groups"] == ["conv2"]  # .5 of .92 total
    assert ranking.float_nodes({"coverage": 0.9})["groups"] == ["conv2", "fc", "conv1"]
    assert ranking.float_nodes({"coverage": 1.0})["groups"] == ["conv2", "fc", "conv1", "relu1"]  # never a useless node


def test_the_base_configuration_is_the_first_choices_without_fine_tuning() -> None:
    assert base_config(SPACE) == {"activation": "XInt8Spec", "activation_params": {"symmetric": True},
                                  "cle_algo": "cle", "OptimizeModel": True}


def test_the_keep_float_choice_is_a_searched_parameter_recorded_on_each_trial_and_the_winner(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=8,
                      sensitivity={"search": {"top_k": [0, 1, 2]}})
    ranking = Ranking(rank(SCORES, {}, "sum"))
    fake = FakeQuark()

    def score(model: Path) -> float:  # keeping the two most sensitive groups float is the best
        config = json.loads(model.read_text())
        return {0: 1.0, 1: 0.5, 2: 0.1}[config["keep_float"]["top_k"]] + (0.01 if config["cle_algo"] is None else 0)

    search = Search(s)
    search.attach(fake.quantize, score, float_nodes=ranking.float_nodes)
    assert search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs)) is None
    trials = [t for t in search.sampler_study.get_trials() if t.state.name == "COMPLETE"]
    assert all("keep_float_top_k" in t.params for t in trials)  # an Optuna parameter like any other
    quantized = [config_key(c) for c in fake.quantized]
    assert len(quantized) == len(set(quantized))  # config_key sees it: a repeated choice is answered from the study
    best = write_best(search)
    assert best["config"]["keep_float"] == {"top_k": 2}
    assert best["keep_float"] == {"choice": {"top_k": 2}, "groups": ["conv2", "fc"], "nodes": ["conv2", "fc"]}


def test_a_coverage_search_draws_a_fraction_in_its_range(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=3,
                      sensitivity={"search": {"coverage": {"low": 0.2, "high": 0.6}}})
    fake = FakeQuark()
    search = Search(s)
    search.attach(fake.quantize, lambda model: 1.0, float_nodes=Ranking(rank(SCORES, {}, "sum")).float_nodes)
    search.run([])
    values: list[Any] = [c["keep_float"]["coverage"] for c in fake.quantized]
    assert values and all(0.2 <= v <= 0.6 for v in values)
