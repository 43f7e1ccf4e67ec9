"""Keep-in-float pass: Spec in; QAS326 (the engine does not support it) and QAS710 (names not in the model) out.

Quark's AutoSearchPro excludes a single node at most (QUARK-FACTS F7); engine qas applies node names,
op types and (start, end) subgraphs as declared, so each name must exist in the model's main graph.
What each engine supports is asked of it (`runtime.contract.Engine.supports`).
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.check.engine_support import refusals
from compiler.check.intake_facts import analysis
from compiler.check.resolved import engine
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec
from compiler.front.suggest import did_you_mean


def check(spec: Spec) -> Iterator[Diagnostic]:
    yield from _unsupported(spec)
    if not engine(spec).supports("keep_float") or spec.keep_float.empty:
        return
    nodes = analysis(spec)["nodes"]
    names = [n["name"] for n in nodes]
    op_types = sorted({n["op_type"] for n in nodes})
    k = spec.keep_float
    for i, name in enumerate(k.nodes):
        if name not in names:
            yield _unknown("node", name, names, (*k.path, "nodes", i))
    for i, op_type in enumerate(k.op_types):
        if op_type not in op_types:
            yield _unknown("op type", op_type, op_types, (*k.path, "op_types", i))
    for i, pair in enumerate(k.subgraphs):
        for j, name in enumerate(pair):
            if name not in names:
                yield _unknown("node", name, names, (*k.path, "subgraphs", i, j))
        if all(n in names for n in pair) and names.index(pair[0]) > names.index(pair[1]):
            yield diag("QAS710", f"subgraph [{pair[0]!r}, {pair[1]!r}] starts after it ends in the graph's node order",
                       (*k.path, "subgraphs", i), hint="write [start, end] with start before end")


def _unknown(kind: str, name: str, known: list[str], at) -> Diagnostic:
    return diag("QAS710", f"keep_float names {kind} {name!r}, which the model does not have", at,
                hint=did_you_mean(name, known) or "see `nodes` in model_analysis.json for the names")


def _unsupported(spec: Spec) -> Iterator[Diagnostic]:
    k, search, output = spec.keep_float, spec.search, spec.output
    yield from refusals(spec, (
        (not k.empty, "keep_float", "keep_float", k.path),
        (output.keep_models != "all", "keep_models", "keep_models", (*output.path, "keep_models")),
        (search.max_failures is not None, "max_failures", "max_failures", (*search.path, "max_failures")),
        (search.trial_timeout is not None, "trial_timeout", "trial_timeout", (*search.path, "trial_timeout")),
        (search.calibration_cache is True, "calibration_cache", "calibration_cache: true",
         (*search.path, "calibration_cache")),
        (search.prune is not None, "prune", f"prune: {search.prune}", (*search.path, "prune"))))
