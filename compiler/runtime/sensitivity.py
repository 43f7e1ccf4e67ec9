"""The sensitivity stage: settings, readers and a quantizer in; the ranking a trial reads (sensitivity.json, measured
or reused, with its charts) out, and the lines that tell the user what it says and how sure it is.

The jobs live in their own modules: sensitivity_graph (quantized nodes mapped to float nodes, the Q/DQ bypass),
sensitivity_measure (one quantization, per-sample drops), sensitivity_rank (robust scores, noise, groups, the
prefix a trial keeps), sensitivity_cache (key, cached file, lock), sensitivity_charts, sensitivity_search (the
keep_float search dimension). Standard library at import time.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import contract
from .checks import fail
from .console import say
from .files import write_json
from .sensitivity_cache import FORMAT, cache_key, data_hash, exclusive, load_cached
from .sensitivity_charts import write_charts
from .sensitivity_rank import Ranking, rank, resolved

SENSITIVITY_FILE = contract.SENSITIVITY_FILE
DEFAULTS = {"method": "L2", "samples": 32, "aggregate": "sum", "blocks": {}, "top": 20, "base": None, "search": None}
# What each method measures, said in words: the L2 here is a mean squared error per output value, on another scale
# than the search's metric L2 (Quark's Euclidean distance over a whole output), and the report shows them side by side
MEASURES = {"L2": "mean squared error (L2)", "KL": "KL divergence", "cosine": "cosine distance"}
FEW_SAMPLES = 16  # below this, the ranking's noise is said to be large
# Pre-processing that rewrites weights (cross-layer equalization): the float nodes are then no stand-in for a
# quantized node, so the analysis quantizes without it
WEIGHT_REWRITES = {"cle_algo": None}


def options(given: dict[str, Any] | None) -> dict[str, Any]:
    """Settings.sensitivity (None: not declared) in; every option with its default out."""
    return {**DEFAULTS, **(given or {})}


class FirstChoices:
    """A stand-in for an Optuna trial that always takes the first choice (the low end of a range)."""

    def suggest_categorical(self, _name: str, choices: list[Any]) -> Any:
        return choices[0]

    def suggest_int(self, _name: str, low: int, _high: int, step: int = 1) -> int:
        return low

    def suggest_float(self, _name: str, low: float, _high: float, log: bool = False) -> float:
        return low


def base_config(space: dict[str, Any]) -> dict[str, Any]:
    """The space's first choices, without fine-tuning and without weight rewrites (plain calibration: what the
    ranking is measured on)."""
    from .space import grid_space, suggest_config

    return analysis_base(suggest_config(FirstChoices(), grid_space(space)))


def analysis_base(base: dict[str, Any]) -> dict[str, Any]:
    """A base configuration with the weight-rewriting pre-processing switched off (see WEIGHT_REWRITES)."""
    out = {**base, **WEIGHT_REWRITES}
    out.pop("cle_params", None)
    return out


def ensure(settings: Any, calib: Any, evaluation: Any, exclusions: list[Any],
           quantize: Callable[[dict[str, Any], Path, list[Any]], None]) -> Ranking:
    """The ranking for these settings: read from sensitivity.json when its key matches, else measured and written
    (with its charts). Several workers at once: one measures under a lock, the others read its result. A failed
    measurement stops with a message (its traceback in the log) and leaves neither lock nor half a file."""
    from .sensitivity_measure import Runner, measure, sample_list

    opts = options(settings.sensitivity)
    base = analysis_base(opts["base"] if opts["base"] is not None else base_config(settings.search_space))
    if (opts["base"] or {}).get("cle_algo") is not None:
        say("qas: sensitivity: the base configuration is measured without cle_algo (cross-layer equalization rewrites "
            "weights, so the float nodes would not stand in for the quantized ones); the trials keep it")
    samples = sample_list(evaluation, opts["samples"])
    if not samples:
        fail("the evaluation reader gave no samples for the sensitivity analysis")
    key = cache_key(settings.model_sha256, base, data_hash(sample_list(calib, 10**9), samples), opts["method"],
                    len(samples), exclusions)
    path = settings.path(SENSITIVITY_FILE)
    with exclusive(settings.path(SENSITIVITY_FILE + ".lock")):
        data = load_cached(path, key)
        if data is not None:
            say(f"qas: sensitivity: reusing {SENSITIVITY_FILE} (same model, base configuration, data and method)")
        else:
            say(f"qas: sensitivity: quantizing once with the base configuration, then scoring each candidate on "
                f"{len(samples)} samples ({opts['method']})")
            work = settings.path(settings.temp_dir) if settings.temp_dir else settings.here
            try:
                measured = measure(settings.model_path, quantize, base, exclusions, Runner(samples, settings.device),
                                   opts["method"], work)
            except Exception as error:  # noqa: BLE001 - Quark or onnxruntime: say what failed, keep the traceback
                traceback.print_exc()
                fail(f"the sensitivity analysis failed: {type(error).__name__}: {str(error).splitlines()[0][:300]} "
                     f"(the traceback is in {contract.SEARCH_LOG_FILE})")
            baseline = measured["baseline_errors"]
            data = {"format": FORMAT, "key": key, "method": opts["method"], "samples": len(samples), "base": base,
                    "fixed_exclusions": exclusions, "baseline_error": sum(baseline) / len(baseline), **measured}
        data["aggregate"], data["blocks"] = opts["aggregate"], opts["blocks"]
        data["groups"] = rank(data["candidates"], opts["blocks"], opts["aggregate"])
        data["nodes"] = {n: g["score"] for g in rank(data["candidates"], {}, opts["aggregate"])
                         for n in g["candidates"]}
        data["resolved"] = resolved(data["groups"])
        data["notes"] = notes(data)
        write_json(path, data)
    for line in ranking_lines(data, 3):
        say(f"qas: sensitivity: {line}")
    for line in write_charts(path, data["groups"][:opts["top"]],
                              MEASURES.get(data["method"], f"{data['method']} error")):
        say(f"qas: sensitivity: {line}")
    return Ranking(data["groups"], node_order(settings.model_path))


def node_order(model_path: Path) -> list[str]:
    """The float model's node names in its (topological) order, for strategy partitioned's spans."""
    import onnx

    return [n.name for n in onnx.load(str(model_path), load_external_data=False).graph.node]


def notes(data: dict[str, Any]) -> list[str]:
    """What the reader of the ranking must know: how far it is above its noise, what is not ranked, and why."""
    groups = data["groups"]
    above = sum(g["above_noise"] for g in groups)
    out = []
    if groups and data["resolved"] == 0:
        out.append(f"the ranking is inside its noise: no group's score is clearly above the spread over the "
                   f"{data['samples']} samples (its order is not meaningful; more evaluation samples narrow it)")
    else:
        order = ("the first stands clearly ahead" if data["resolved"] == 1 else
                 f"the order of the first {data['resolved']} is supported by the samples")
        out.append(f"{above} of {len(groups)} groups are above their noise; {order}, the rest are within each "
                   f"other's noise")
    if data["samples"] < FEW_SAMPLES:
        out.append(f"only {data['samples']} samples: the noise estimate is rough (keep_float.sensitivity.samples and "
                   f"more evaluation data give a steadier ranking)")
    if data.get("not_ranked"):
        out.append(f"not ranked: the bodies of {', '.join(data['not_ranked'])} (If/Loop/Scan subgraphs are neither "
                   f"scored nor kept in float by the ranking)")
    if data.get("unmapped"):
        out.append(f"not ranked: {', '.join(data['unmapped'])} of the quantized model (they map to no named node "
                   f"of the float model, so keep_float could not name them)")
    if data.get("skipped"):
        out.append(f"not ranked: {', '.join(data['skipped'])} (their bypassed model did not run; see "
                   f"{SENSITIVITY_FILE} 'skipped')")
    return out


def choice_text(choice: Any) -> str:
    """A keep_float choice as the spec writes it ({'top_k': 3} -> 'top_k 3', {'coverage': 0.8330} ->
    'coverage 0.833', {'partitioned': [[0.1, 0.2]]} -> 'partitioned 0.1-0.3')."""
    if not isinstance(choice, dict):
        return str(choice)
    if "partitioned" in choice:
        return "partitioned " + ", ".join(f"{start:.2f}-{start + width:.2f}" for start, width in choice["partitioned"])
    if "granular" in choice:
        return "granular " + (", ".join(f"#{i + 1}" for i in choice["granular"]) or "none")
    if "groups" in choice:  # accuracy_control: a prefix of the ranking is said as one
        kept = choice["groups"]
        if not kept or kept == list(range(len(kept))):
            return f"top {len(kept)}" if kept else "none kept"
        missing = sorted(set(range(max(kept) + 1)) - set(kept))  # a prefix with a few dropped reads shorter
        if len(missing) < len(kept):
            return f"top {max(kept) + 1} without " + ", ".join(f"#{i + 1}" for i in missing)
        return "groups " + ", ".join(f"#{i + 1}" for i in kept)
    return ", ".join(f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}"
                     for key, value in choice.items())


def ranking_lines(data: dict[str, Any], top: int) -> list[str]:
    """sensitivity.json in; the top groups (marked when within their noise), its cost and its notes, as lines."""
    total = sum(g["score"] for g in data["groups"] if g["above_noise"] and g["score"] > 0) or 1.0
    measure = MEASURES.get(data["method"], f"{data['method']} error")
    lines = [f"{measure} at the output removed by keeping a group in float (trimmed mean over "
             f"{data['samples']} samples, +- noise); quantized base error {data['baseline_error']:.4g}:"]
    for k, group in enumerate(data["groups"][:top], 1):
        share = f"{100 * max(group['score'], 0) / total:5.1f}%" if group["above_noise"] else "within noise"
        nodes = "" if group["nodes"] == [group["name"]] else f"  [{', '.join(group['nodes'])}]"
        lines.append(f"  {k:>3}. {group['name']:<24} {group['score']:>10.4g} +- {group['noise']:<9.3g} {share}{nodes}")
    cost = data["cost"]
    lines.append(f"cost: 1 quantization ({cost['quantize_s']:g} s) + {cost['inferences']} inferences "
                 f"({cost['candidates']} candidates, {cost['infer_s']:g} s)")
    return lines + [f"note: {n}" for n in data.get("notes", [])]
