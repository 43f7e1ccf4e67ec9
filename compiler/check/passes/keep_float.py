"""Sensitivity pass: Spec in; diagnostics out for keep_float.blocks, keep_float.sensitivity and keep_float.search.

QAS326: the engine has no sensitivity analysis (AutoSearchPro); QAS341: a block pattern RE2 cannot compile (the
runtime matches with RE2 too, both through runtime/patterns.py: linear time whatever the pattern); QAS340: a block
pattern that matches no node of the model (with the closest names); QAS342: a search dimension without a sampler
stage to search it; QAS343: a base configuration that is not in the space; QAS344: an empty coverage range; QAS345:
keep_float.search with more than one form (top_k, coverage, strategy) or sections without strategy partitioned;
QAS358: strategy accuracy_control where its steps cannot decide (no tolerance, nothing but accuracy to rank by, a
fine-tuning search beside it, or a sampled space it would not search).
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterator
from typing import Any

from compiler.check.engine_support import refusals
from compiler.check.intake_facts import analysis
from compiler.check.resolved import engine, merged_space, objectives, two_stage
from compiler.check.spacemath import optuna_distinct
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec
from compiler.runtime.patterns import RE2_DISTRIBUTION, PatternEngineMissing, PatternError, block_pattern


def check(spec: Spec) -> Iterator[Diagnostic]:
    k = spec.keep_float
    if not k.uses_sensitivity:
        return
    if not engine(spec).supports("sensitivity"):
        yield from refusals(spec, ((bool(getattr(k, key)), "sensitivity", f"keep_float.{key}", (*k.path, key))
                                   for key in ("blocks", "sensitivity", "search")))
        return
    yield from _blocks(spec)
    if k.search is not None:
        yield from _search(spec, k.search)
    if k.sensitivity is not None and "base" in k.sensitivity:
        yield from _base(spec, k.sensitivity["base"])


def _blocks(spec: Spec) -> Iterator[Diagnostic]:
    names = [n["name"] for n in analysis(spec)["nodes"]] if spec.keep_float.blocks else []
    for block, patterns in spec.keep_float.blocks.items():
        for i, pattern in enumerate(patterns):
            at = (*spec.keep_float.path, "blocks", block, i)
            try:
                compiled = block_pattern(pattern)
            except PatternEngineMissing as error:
                yield diag("QAS601", f"{RE2_DISTRIBUTION} is not installed in {sys.executable}; qas matches "
                                     "keep_float.blocks with it", at, hint=str(error))
                return
            except PatternError as error:
                yield diag("QAS341", f"block {block!r}: {_short(pattern)} is not a pattern RE2 can match in linear "
                                     f"time: {_short(str(error), 200, quote=False)}", at,
                           hint="patterns are RE2 regular expressions (Python's re syntax without backreferences or "
                                "lookaround, counts up to 1000) matched with search; escape . [ ( with \\")
                continue
            if not any(compiled.search(name) for name in names):
                yield diag("QAS340", f"block {block!r}: pattern {_short(pattern)} matches no node of the model", at,
                           hint=_closest(pattern, names))


def _short(text: str, limit: int = 80, quote: bool = True) -> str:
    """A pattern (or RE2's reason, which repeats it) for a message: repr'd, cut to `limit` characters."""
    shown = repr(text) if quote else text
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def _closest(pattern: str, names: list[str]) -> str:
    """The node names nearest a pattern (its regex punctuation dropped), as a hint."""
    plain = re.sub(r"[\\^$.*+?()\[\]{}|]", "", pattern)[:200]  # difflib is quadratic in the lengths
    close = difflib.get_close_matches(plain, names, n=3, cutoff=0.3) or names[:3]
    return "the closest node names: " + ", ".join(repr(n) for n in close) + " (all are in model_analysis.json)"


def _search(spec: Spec, search: dict[str, Any]) -> Iterator[Diagnostic]:
    at = (*spec.keep_float.path, "search")
    forms = [key for key in ("top_k", "coverage", "strategy") if key in search]
    if len(forms) != 1 or ("sections" in search and search.get("strategy") != "partitioned"):
        yield diag("QAS345", "keep_float.search takes one form: top_k, coverage, strategy granular, or strategy "
                             f"partitioned (with sections); it has {', '.join(sorted(search))}", at,
                   hint="e.g. search: {top_k: [0, 1, 2, 4]} or search: {strategy: partitioned, sections: 2}",
                   at_key=True)
    if "coverage" in search and search["coverage"]["low"] > search["coverage"]["high"]:
        yield diag("QAS344", f"keep_float.search coverage low ({search['coverage']['low']:g}) is above high "
                             f"({search['coverage']['high']:g})", (*at, "coverage"),
                   hint="write low <= high, fractions of the total sensitivity between 0 and 1")
    space = merged_space(spec)
    if search.get("strategy") == "accuracy_control":
        yield from _accuracy_control(spec, space, at)
    if spec.search.sampler == "Grid":
        yield diag("QAS342", "keep_float.search adds a sampled parameter, but sampler Grid has no sampler stage", at,
                   hint="use a sampler such as TPE (the grid covers the space's lists only)", at_key=True)
    elif two_stage(spec) and "algorithms" not in space and search.get("strategy") != "accuracy_control":
        yield diag("QAS342", "keep_float.search is searched in the sampler stage, and this two-stage search has none "
                             "(its space has no algorithms)", at,
                   hint="set search.two_stage: false, or add algorithms to the space", at_key=True)


def _accuracy_control(spec: Spec, space: dict[str, Any], at: tuple[Any, ...]) -> Iterator[Diagnostic]:
    """strategy accuracy_control decides each step by the tolerance, and its answer is the most quantized model within
    it: it needs a tolerance, an objective that prefers less float, and one configuration to vary only the float set
    of (a two-stage search's grid winner, or a space of one configuration)."""
    where = (*at, "strategy")
    if spec.evaluation.tolerance is None:
        yield diag("QAS358", "keep_float.search strategy accuracy_control keeps groups float until the model is within "
                             "evaluation.tolerance, and the spec declares none", where,
                   hint="add evaluation.tolerance, e.g. tolerance: 0.01 (the metric's units) or \"1%\" (evaluator)")
    if objectives(spec) == ["accuracy"]:
        yield diag("QAS358", "strategy accuracy_control's answer is the most quantized model within tolerance, and "
                             "with accuracy as the only objective the winner would be the most accurate one (the most "
                             "kept float)", where,
                   hint="add search.objectives: [accuracy, quantized_fraction] (or latency, or size)")
    if "algorithms" in space:
        yield diag("QAS358", "strategy accuracy_control compares models that differ only in what stays float, and the "
                             "space also searches fine-tuning (algorithms): two things would change at once", where,
                   hint="remove algorithms from the space, or use search: {top_k: [...]} to search both")
    elif not two_stage(spec) and spec.search.sampler != "Grid" and optuna_distinct(space) > 1:
        yield diag("QAS358", "strategy accuracy_control runs on one configuration, and this space samples several "
                             "without a grid stage to choose one", where,
                   hint="set search.two_stage: true (the space's grid runs fully quantized first, then accuracy "
                        "control on its winner), or narrow the space to one choice a key")


def _base(spec: Spec, base: dict[str, Any]) -> Iterator[Diagnostic]:
    space = merged_space(spec)
    at = (*spec.keep_float.path, "sensitivity", "base")
    for key, value in base.items():
        choices = space.get(key)
        if choices is None:
            yield diag("QAS343", f"the base configuration sets {key!r}, which the search space does not have",
                       (*at, key), hint=f"use keys of the space: {', '.join(repr(k) for k in space)}")
        elif isinstance(choices, dict) and isinstance(value, dict):
            for sub, v in value.items():
                inner = choices.get(sub)
                if sub == "only_if" or inner is None:
                    yield diag("QAS343", f"the base configuration sets {key}.{sub}, which the space's group does not "
                                         "have", (*at, key, sub),
                               hint=f"use one of: {', '.join(k for k in choices if k != 'only_if')}")
                elif isinstance(inner, list) and v not in inner:
                    yield diag("QAS343", f"the base configuration's {key}.{sub} is {v!r}, not one of the space's "
                                         f"choices {inner!r}", (*at, key, sub), hint="take one of the choices")
        elif isinstance(choices, list) and value not in choices:
            yield diag("QAS343", f"the base configuration's {key} is {value!r}, not one of the space's choices "
                                 f"{choices!r}", (*at, key), hint="take one of the choices")
        elif isinstance(choices, dict) != isinstance(value, dict):
            yield diag("QAS343", f"the base configuration's {key} must be "
                                 f"{'a mapping' if isinstance(choices, dict) else 'a value'}",
                       (*at, key), hint="write it as the space does")
