"""The sensitivity stage without amd-quark: quantized nodes mapped to float nodes by tensors and bypassed without a
duplicate definition (on hand-written Quark-style Q/DQ graphs), robust scores with a noise floor, blocks (first match
wins), the searched prefix (top_k and coverage), the lock a failure leaves behind, and the keep_float parameter in
engine qas's loop (part of each config, recorded on trials and the winner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import optuna
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.runtime import sensitivity
from compiler.runtime.results import write_best
from compiler.runtime.search import Search
from compiler.runtime.sensitivity import base_config
from compiler.runtime.sensitivity_graph import bypass, candidates
from compiler.runtime.sensitivity_rank import Ranking, group_nodes, rank, resolved, robust
from compiler.runtime.space import config_key, stage_configs

from .conftest import SPACE, FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)
SCORES = {"conv1": 0.1, "relu1": 0.02, "conv2": 0.5, "relu2": 0.0, "fc": 0.3, "pool": -0.01}


def exact(scores: dict[str, float], samples: int = 8) -> dict[str, dict[str, Any]]:
    """Candidates whose every sample drops by the same amount (no noise), one float node each."""
    return {n: {"nodes": [n], "drops": [v] * samples} for n, v in scores.items()}


def test_a_candidate_joins_the_first_block_that_matches_one_of_its_nodes_and_unmatched_ones_are_their_own_group(
) -> None:
    groups = group_nodes({n: [n] for n in SCORES} | {"mm": ["mm", "mm_add"]},
                         {"stem": ["^conv1$", "relu1"], "convs": ["conv"], "late": ["relu"], "adds": ["_add$"]})
    assert groups == {"stem": ["conv1", "relu1"], "convs": ["conv2"], "late": ["relu2"], "fc": ["fc"], "pool": ["pool"],
                      "adds": ["mm"]}


@pytest.mark.parametrize("aggregate, first, score", [("sum", "body", 0.5), ("max", "body", 0.5), ("mean", "fc", 0.3)])
def test_groups_are_ranked_by_their_aggregated_score(aggregate: str, first: str, score: float) -> None:
    ranked = rank(exact(SCORES), {"body": ["conv2", "relu2"]}, aggregate)
    assert (ranked[0]["name"], ranked[0]["score"]) == (first, pytest.approx(score))
    assert [g["name"] for g in ranked][-1] == "pool"


def test_the_prefix_is_the_top_k_or_the_fewest_groups_covering_the_fraction() -> None:
    ranking = Ranking(rank(exact(SCORES), {}, "sum"))  # conv2 .5, fc .3, conv1 .1, relu1 .02, relu2 0, pool -.01
    assert ranking.float_nodes({"top_k": 2})["nodes"] == ["conv2", "fc"]
    assert ranking.float_nodes({"top_k": 0})["nodes"] == []
    assert ranking.float_nodes({"coverage": 0.0})["groups"] == []
    assert ranking.float_nodes({"coverage": 0.5})["groups"] == ["conv2"]  # .5 of .92 total
    assert ranking.float_nodes({"coverage": 0.9})["groups"] == ["conv2", "fc", "conv1"]
    assert ranking.float_nodes({"coverage": 1.0})["groups"] == ["conv2", "fc", "conv1", "relu1"]  # never a useless node


def test_one_borderline_sample_does_not_carry_a_score_and_scores_inside_the_noise_are_marked() -> None:
    rng = np.random.default_rng(1)
    steady = list(0.10 + rng.normal(0, 0.005, 32))  # helps every sample a little
    borderline = [0.0] * 31 + [40.0]  # one sample flips: the mean would be 1.25, far above `steady`
    noisy = list(rng.normal(0, 0.2, 32))  # helps nothing on average
    groups = rank({"steady": {"nodes": ["steady"], "drops": steady},
                   "borderline": {"nodes": ["b"], "drops": borderline},
                   "noisy": {"nodes": ["noisy"], "drops": noisy}}, {}, "sum")
    assert groups[0]["name"] == "steady" and groups[0]["above_noise"] and groups[0]["separated"]
    assert robust(borderline) == 0.0
    assert not next(g for g in groups if g["name"] == "noisy")["above_noise"]
    assert resolved(groups) == 1
    ranking = Ranking(groups)  # a coverage choice counts only what is above the noise
    assert ranking.float_nodes({"coverage": 1.0})["groups"] == ["steady"]


def test_the_base_configuration_is_the_first_choices_without_fine_tuning_or_weight_rewrites() -> None:
    assert base_config(SPACE) == {"activation": "XInt8Spec", "activation_params": {"symmetric": True},
                                  "cle_algo": None, "OptimizeModel": True}


# --- Quark-style Q/DQ graphs written by hand ---------------------------------------------------------------------
def _init(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def _qdq(nodes: list[Any], inits: list[Any], tensor: str, raw: str, out: str, scale: float = 0.05) -> None:
    """raw -> QuantizeLinear -> DequantizeLinear -> out, as Quark writes it."""
    inits += [_init(f"{tensor}_scale", scale), _init(f"{tensor}_zero_point", 0, np.int8)]
    nodes.append(helper.make_node("QuantizeLinear", [raw, f"{tensor}_scale", f"{tensor}_zero_point"],
                                  [f"{tensor}_QuantizeLinear_Output"], name=f"{tensor}_QuantizeLinear"))
    nodes.append(helper.make_node("DequantizeLinear", [f"{tensor}_QuantizeLinear_Output", f"{tensor}_scale",
                                                       f"{tensor}_zero_point"], [out],
                                  name=f"{tensor}_DequantizeLinear"))


def _weight(nodes: list[Any], inits: list[Any], name: str, values: Any, out: str) -> None:
    """A weight stored as int8 and read through a DequantizeLinear (a bias: int32), as Quark writes it."""
    values = np.asarray(values, np.float32)
    scale = float(np.abs(values).max() / 127) or 1.0
    dtype = np.int32 if values.ndim == 1 else np.int8
    inits += [_init(f"{name}_quantized", np.round(values / scale), dtype), _init(f"{name}_scale", scale),
              _init(f"{name}_zero_point", 0, dtype)]
    nodes.append(helper.make_node("DequantizeLinear", [f"{name}_quantized", f"{name}_scale", f"{name}_zero_point"],
                                  [out], name=f"{name}_DequantizeLinear"))


def _model(nodes: list[Any], inits: list[Any], inputs: dict[str, list[int]], outputs: dict[str, list[int]]) -> Any:
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _run(model: Any, feed: dict[str, Any]) -> list[Any]:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"]).run(None, feed)


RNG = np.random.default_rng(0)
W, B = RNG.normal(0, 0.5, (8, 4)).astype(np.float32), RNG.normal(0, 0.1, 8).astype(np.float32)
M, MB = RNG.normal(0, 0.5, (8, 8)).astype(np.float32), RNG.normal(0, 0.1, 8).astype(np.float32)
FEED = {"x": RNG.normal(0, 1, (2, 4)).astype(np.float32)}


def two_output_models() -> tuple[Any, Any]:
    """A float model with a Gemm (bias), a MatMul+Add and two outputs, and its Int8Spec-style quantized form: the bias
    DequantizeLinear writes a tensor named as the float bias initializer (fc.b), MatMul+Add became one Gemm named after
    the MatMul, and the Gemm writes a renamed tensor before the output's Q/DQ."""
    float_model = _model(
        [helper.make_node("Gemm", ["x", "fc.w", "fc.b"], ["h"], name="fc", transB=1),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "mm.w"], ["m"], name="mm"),
         helper.make_node("Add", ["m", "mm.b"], ["y"], name="mm_add"),
         helper.make_node("Sigmoid", ["h"], ["s"], name="gate")],
        [_init("fc.w", W), _init("fc.b", B), _init("mm.w", M), _init("mm.b", MB)], {"x": [2, 4]},
        {"y": [2, 8], "s": [2, 8]})
    nodes: list[Any] = []
    inits: list[Any] = []
    _qdq(nodes, inits, "x", "x", "x_DequantizeLinear_Output")
    _weight(nodes, inits, "fc.w", W, "fc.w_DequantizeLinear_Output")
    _weight(nodes, inits, "fc.b", B, "fc.b")  # the float bias's own name, now a node output
    nodes.append(helper.make_node("Gemm", ["x_DequantizeLinear_Output", "fc.w_DequantizeLinear_Output", "fc.b"], ["h"],
                                  name="fc", transB=1))
    _qdq(nodes, inits, "h", "h", "h_DequantizeLinear_Output")
    nodes.append(helper.make_node("Relu", ["h_DequantizeLinear_Output"], ["r"], name="relu"))
    _qdq(nodes, inits, "r", "r", "r_DequantizeLinear_Output")
    _weight(nodes, inits, "mm_weight", M.T, "mm_weight_DequantizeLinear_Output")
    _weight(nodes, inits, "mm.b", MB, "mm.b_DequantizeLinear_Output")
    nodes.append(helper.make_node("Gemm", ["r_DequantizeLinear_Output", "mm_weight_DequantizeLinear_Output",
                                           "mm.b_DequantizeLinear_Output"], ["y_QuantizeLinear_Input"],
                                  name="mm", transB=1))
    _qdq(nodes, inits, "y", "y_QuantizeLinear_Input", "y")
    nodes.append(helper.make_node("Sigmoid", ["h_DequantizeLinear_Output"], ["s_QuantizeLinear_Input"], name="gate"))
    _qdq(nodes, inits, "s", "s_QuantizeLinear_Input", "s", scale=0.01)
    return float_model, _model(nodes, inits, {"x": [2, 4]}, {"y": [2, 8], "s": [2, 8]})


def test_quantized_nodes_map_to_the_float_nodes_they_came_from_by_tensors() -> None:
    float_model, quantized = two_output_models()
    found = {c.name: c.nodes for c in candidates(float_model, quantized)}
    assert found == {"fc": ("fc",), "relu": ("relu",), "mm": ("mm", "mm_add"), "gate": ("gate",)}


def test_a_bypassed_gemm_reads_its_float_initializers_without_defining_a_name_twice() -> None:
    float_model, quantized = two_output_models()
    by_name = {c.name: c for c in candidates(float_model, quantized)}
    for name in ("fc", "mm", "gate"):
        model = bypass(quantized, float_model, [by_name[name]])
        onnx.checker.check_model(model)  # the old bypass appended fc.b beside the DequantizeLinear writing fc.b
        outputs = _run(model, FEED)  # onnxruntime: "Duplicate definition of name (fc.b)" before the fix
        assert [o.shape for o in outputs] == [(2, 8), (2, 8)]
    everything = bypass(quantized, float_model, list(by_name.values()))
    x_quantized = {"x": np.round(FEED["x"] / 0.05).clip(-128, 127).astype(np.float32) * 0.05}
    for got, want in zip(_run(everything, FEED), _run(float_model, x_quantized), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # all in float: the float model on quantized x
    kept = bypass(quantized, float_model, [by_name["mm"]])
    assert not any(n.op_type == "Gemm" and n.name == "mm" for n in kept.graph.node)
    assert [n.op_type for n in kept.graph.node if n.name.startswith("qas_float/")] == ["MatMul", "Add"]


class Reader:
    """A data reader over fixed samples."""

    def __init__(self, samples: list[dict[str, Any]]) -> None:
        self.samples, self.at = samples, 0

    def get_next(self) -> dict[str, Any] | None:
        self.at += 1
        return self.samples[self.at - 1] if self.at <= len(self.samples) else None

    def reset_iter(self) -> None:
        self.at = 0


def test_a_failed_analysis_stops_with_a_message_and_leaves_no_lock_file(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    float_model, _ = two_output_models()
    onnx.save(float_model, str(tmp_path / "model.onnx"))
    s = fake_settings(tmp_path, sensitivity={"samples": 4})
    reader = Reader([FEED] * 4)

    def quantize(config: dict[str, Any], output: Path, exclusions: list[Any]) -> None:
        raise RuntimeError("Quark could not quantize this")

    with pytest.raises(SystemExit):
        sensitivity.ensure(s, reader, reader, [], quantize)
    assert "the sensitivity analysis failed: RuntimeError: Quark could not quantize this" in capsys.readouterr().err
    assert not (tmp_path / "sensitivity.json.lock").exists() and not (tmp_path / "sensitivity.json").exists()


def test_the_analysis_writes_scores_with_their_noise_and_leaves_no_lock_file(tmp_path: Path) -> None:
    float_model, quantized = two_output_models()
    onnx.save(float_model, str(tmp_path / "model.onnx"))
    s = fake_settings(tmp_path, sensitivity={"samples": 4})
    reader = Reader([{"x": RNG.normal(0, 1, (2, 4)).astype(np.float32)} for _ in range(6)])

    def quantize(config: dict[str, Any], output: Path, exclusions: list[Any]) -> None:
        onnx.save(quantized, str(output))

    ranking = sensitivity.ensure(s, reader, reader, [], quantize)
    data = json.loads((tmp_path / "sensitivity.json").read_text())
    assert data["samples"] == 4 and len(data["baseline_errors"]) == 4
    assert {g["name"] for g in data["groups"]} == {"fc", "relu", "mm", "gate"}
    assert all({"score", "noise", "above_noise", "separated"} <= set(g) for g in data["groups"])
    assert any("only 4 samples" in n for n in data["notes"])
    assert [g["name"] for g in ranking.groups] == [g["name"] for g in data["groups"]]
    assert ranking.float_nodes({"top_k": 4})["nodes"].count("mm_add") == 1
    assert not (tmp_path / "sensitivity.json.lock").exists()


def test_the_keep_float_choice_is_a_searched_parameter_recorded_on_each_trial_and_the_winner(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=8,
                      sensitivity={"search": {"top_k": [0, 1, 2]}})
    ranking = Ranking(rank(exact(SCORES), {}, "sum"))
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
    search.attach(fake.quantize, lambda model: 1.0, float_nodes=Ranking(rank(exact(SCORES), {}, "sum")).float_nodes)
    search.run([])
    values: list[Any] = [c["keep_float"]["coverage"] for c in fake.quantized]
    assert values and all(0.2 <= v <= 0.6 for v in values)


def test_if_and_loop_bodies_are_said_to_be_unranked_and_scores_within_noise_are_marked_in_the_lines() -> None:
    from compiler.runtime.sensitivity_graph import unranked_bodies

    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])])
    model = _model([helper.make_node("ReduceSum", ["x"], ["c0"], name="total", keepdims=0),
                    helper.make_node("Greater", ["c0", "zero"], ["c"], name="positive"),
                    helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=then)],
                   [_init("zero", 0.0)], {"x": [2, 4]}, {"y": [2, 4]})
    assert unranked_bodies(model) == ["branch"]
    groups = rank(exact({"conv": 0.5}, 5) | {"relu": {"nodes": ["relu"], "drops": [0.3, -0.3, 0.2, -0.2, 0.0]}},
                  {}, "sum")
    data = {"method": "L2", "samples": 5, "baseline_error": 1.0, "groups": groups, "not_ranked": ["branch"],
            "skipped": {}, "cost": {"quantize_s": 1, "inferences": 10, "candidates": 2, "infer_s": 1}}
    data["resolved"] = resolved(groups)
    data["notes"] = sensitivity.notes(data)
    lines = sensitivity.ranking_lines(data, 5)
    assert "100.0%" in next(line for line in lines if " conv " in line)
    assert "within noise" in next(line for line in lines if " relu " in line)
    assert any(line.startswith("note: not ranked: the bodies of branch (If/Loop/Scan") for line in lines)
    assert any(line.startswith("note: only 5 samples") for line in lines)


def test_the_sensitivity_modules_import_only_the_standard_library() -> None:
    import subprocess
    import sys

    from compiler.resources import runtime_files

    modules = [p.stem for p in runtime_files() if p.stem.startswith("sensitivity")]
    assert len(modules) == 7  # the stage, graph, measure, rank, cache, charts, search
    code = (f"import sys; import {', '.join('compiler.runtime.' + m for m in modules)};"
            "print(sorted(m for m in ('optuna', 'quark', 'onnx', 'onnxruntime', 'numpy', 'torch')"
            " if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_weight_nodes_a_quantized_model_still_quantizes_are_found_by_tensors(capsys: pytest.CaptureFixture[str],
                                                                                 tmp_path: Path) -> None:
    from compiler.runtime.sensitivity_graph import quantized_weight_nodes, warn_if_quantized

    float_model, quantized = two_output_models()
    assert quantized_weight_nodes(float_model, quantized) == {"fc", "mm"}  # mm: the Gemm Quark made of mm + mm_add
    by_name = {c.name: c for c in candidates(float_model, quantized)}
    assert quantized_weight_nodes(float_model, bypass(quantized, float_model, [by_name["mm"]])) == {"fc"}
    onnx.save(float_model, str(tmp_path / "float.onnx"))
    onnx.save(quantized, str(tmp_path / "trial.onnx"))
    warn_if_quantized(tmp_path / "float.onnx", tmp_path / "trial.onnx", ["mm", "mm_add", "relu"])
    assert ("keep_float: Quark quantized the weights of mm though the trial keeps them in float"
            in capsys.readouterr().err)


def test_a_base_with_cross_layer_equalization_is_measured_without_it_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    float_model, quantized = two_output_models()
    onnx.save(float_model, str(tmp_path / "model.onnx"))
    s = fake_settings(tmp_path, sensitivity={"samples": 3, "base": {"activation": "XInt8Spec", "cle_algo": "cle",
                                                                    "cle_params": {"cle_steps": -1}}})
    seen: list[dict[str, Any]] = []

    def quantize(config: dict[str, Any], output: Path, exclusions: list[Any]) -> None:
        seen.append(config)
        onnx.save(quantized, str(output))

    sensitivity.ensure(s, Reader([FEED] * 3), Reader([FEED] * 3), [], quantize)
    assert seen == [{"activation": "XInt8Spec", "cle_algo": None}]
    assert "measured without cle_algo" in capsys.readouterr().out


def test_a_quantized_node_that_maps_to_an_unnamed_float_node_is_listed_not_ranked() -> None:
    float_model, quantized = two_output_models()
    next(n for n in float_model.graph.node if n.name == "gate").name = ""
    unmapped: list[str] = []
    assert "gate" not in {c.name for c in candidates(float_model, quantized, unmapped)}
    assert unmapped == ["gate"]


def test_the_sensitivity_lines_and_the_report_say_its_l2_is_a_mean_squared_error() -> None:
    """Its L2 is a mean squared error per output value, the search's L2 Quark's Euclidean distance: the report showed
    'sensitivity L2 on 4 samples, base error 0.00113' beside 'best L2 0.517' as if they were one measure."""
    from compiler.report.text import _sensitivity_facts

    groups = rank(exact({"conv": 0.5}, 5), {}, "sum")
    data = {"method": "L2", "samples": 5, "baseline_error": 1.0, "groups": groups, "not_ranked": [], "skipped": {},
            "cost": {"quantize_s": 1, "inferences": 10, "candidates": 1, "infer_s": 1}}
    assert sensitivity.ranking_lines(data, 5)[0].startswith("mean squared error (L2) at the output removed")
    facts = dict(_sensitivity_facts({"method": "L2", "samples": 5, "baseline_error": 1.0, "top": [], "charts": []}))
    assert facts["sensitivity"].startswith("mean squared error (L2) on 5 samples, base error 1;")
    kl = dict(_sensitivity_facts({"method": "KL", "samples": 5, "baseline_error": 1.0, "top": [], "charts": []}))
    assert kl["sensitivity"].startswith("KL divergence on 5 samples")


def test_the_sensitivity_chart_names_what_its_bars_measure(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    from compiler.runtime.sensitivity_charts import write_charts

    groups = [{"name": "conv", "score": 0.5, "noise": 0.1, "above_noise": True}]
    write_charts(tmp_path / "sensitivity.json", groups, sensitivity.MEASURES["L2"])
    html = (tmp_path / "sensitivity.html").read_text(encoding="utf-8")
    assert "Output mean squared error (L2) removed by keeping each group in float" in html  # not '... L2 error removed'


def test_a_ranking_with_one_resolved_group_says_so_in_words() -> None:
    groups = rank(exact({"conv": 0.5, "fc": 0.1}, 5), {}, "sum")
    data = {"method": "L2", "samples": 5, "baseline_error": 1.0, "groups": groups, "not_ranked": [], "skipped": {},
            "cost": {"quantize_s": 1, "inferences": 10, "candidates": 2, "infer_s": 1}, "resolved": 1}
    first = sensitivity.notes(data)[0]
    assert "the order of the first 1 is" not in first  # it read 'the order of the first 1 is supported'
    assert "; the first stands clearly ahead, the rest are within each other's noise" in first


def test_the_kept_choice_reads_as_the_spec_writes_it() -> None:
    from compiler.report.text import _sensitivity_facts

    assert sensitivity.choice_text({"top_k": 3}) == "top_k 3"
    assert sensitivity.choice_text({"coverage": 0.833036974463395}) == "coverage 0.833"
    sens = {"method": "L2", "samples": 5, "baseline_error": 1.0, "top": [], "charts": [],
            "winner_keeps": {"groups": ["fc2"], "choice": {"top_k": 1}}}
    assert dict(_sensitivity_facts(sens))["kept float"] == "fc2 (choice top_k 1)"  # it read "(choice {'top_k': 1})"


def test_partitioned_spans_keep_the_groups_whose_first_node_falls_in_them() -> None:
    import optuna

    from compiler.runtime.sensitivity import choice_text
    from compiler.runtime.sensitivity_rank import Ranking
    from compiler.runtime.sensitivity_search import suggest_keep_float

    order = [f"n{i}" for i in range(10)]  # positions 0.0, 0.1, ..., 0.9
    groups = [{"name": "late", "nodes": ["n8", "n9"]}, {"name": "early", "nodes": ["n1"]},
              {"name": "block", "nodes": ["n5", "n2"]}, {"name": "gone", "nodes": ["not_in_graph"]}]
    ranking = Ranking(groups, order)
    assert [g["name"] for g in ranking.prefix({"partitioned": [[0.0, 0.15]]})] == ["early"]
    assert [g["name"] for g in ranking.prefix({"partitioned": [[0.15, 0.1], [0.75, 0.1]]})] == ["late", "block"]
    assert ranking.prefix({"partitioned": [[0.3, 0.0]]}) == []  # a zero width keeps nothing
    assert ranking.float_nodes({"partitioned": [[0.8, 0.2]]})["nodes"] == ["n8", "n9"]

    params = {"keep_float_s0_start": 0.1, "keep_float_s0_width": 0.2, "keep_float_s1_start": 0.7,
              "keep_float_s1_width": 0.05}
    choice = suggest_keep_float(optuna.trial.FixedTrial(params), {"strategy": "partitioned", "sections": 2})
    assert choice == {"partitioned": [[0.1, 0.2], [0.7, 0.05]]}
    assert choice_text(choice) == "partitioned 0.10-0.30, 0.70-0.75"
    study = optuna.create_study()
    trial = study.ask()
    suggest_keep_float(trial, {"strategy": "partitioned", "sections": 4})
    assert len(trial.params) == 8 and all(v <= 0.25 for k, v in trial.params.items() if k.endswith("_width"))


def test_granular_is_one_yes_no_a_group_with_informed_starting_points() -> None:
    import optuna

    from compiler.runtime.sensitivity import choice_text
    from compiler.runtime.sensitivity_rank import Ranking
    from compiler.runtime.sensitivity_search import granular_starts, suggest_keep_float

    assert granular_starts(6) == [{f"keep_float_g{i}": i < kept for i in range(6)} for kept in (0, 6, 1, 2, 4)]
    assert granular_starts(3) == [{f"keep_float_g{i}": i < kept for i in range(3)} for kept in (0, 3, 1, 2)]
    assert granular_starts(1) == [{"keep_float_g0": False}, {"keep_float_g0": True}]
    params = {"keep_float_g0": True, "keep_float_g1": False, "keep_float_g2": True}
    choice = suggest_keep_float(optuna.trial.FixedTrial(params), {"strategy": "granular"}, 3)
    assert choice == {"granular": [0, 2]} and choice_text(choice) == "granular #1, #3"
    assert choice_text({"granular": []}) == "granular none"
    ranking = Ranking([{"name": "a", "nodes": ["a"]}, {"name": "b", "nodes": ["b"]}, {"name": "c", "nodes": ["c"]}])
    assert ranking.float_nodes(choice) == {"choice": choice, "groups": ["a", "c"], "nodes": ["a", "c"]}
