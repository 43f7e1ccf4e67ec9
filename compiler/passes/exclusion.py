"""Keep-in-float pass: Spec in; QAS326 (needs engine qas) and QAS710 (names not in the model) out.

Quark's AutoSearchPro excludes a single node at most (QUARK-FACTS F7); engine qas applies node names,
op types and (start, end) subgraphs as declared, so each name must exist in the model's main graph.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..diagnostics import Diagnostic, diag
from ..intake import analysis
from ..model import Spec
from ..suggest import did_you_mean

def check(spec: Spec) -> Iterator[Diagnostic]:
    if spec.search.engine != "qas":
        yield from _engine_only(spec)
        return
    nodes = analysis(spec)["nodes"]
    names = [n["name"] for n in nodes]
    op_types = sorted({n["op_type"] for n in nodes})
    k = spec.keep_float
    for i, name in enumerate(k.nodes):
        if name not in names:
            yield _unknown("node", name, names, k.path + ("nodes", i))
    for i, op_type in enumerate(k.op_types):
        if op_type not in op_types:
            yield _unknown("op type", op_type, op_types, k.path + ("op_types", i))
    for i, pair in enumerate(k.subgraphs):
        for j, name in enumerate(pair):
            if name not in names:
                yield _unknown("node", name, names, k.path + ("subgraphs", i, j))
        if all(n in names for n in pair) and names.index(pair[0]) > names.index(pair[1]):
            yield diag("QAS710", f"subgraph [{pair[0]!r}, {pair[1]!r}] starts after it ends in the graph's node order",
                       k.path + ("subgraphs", i), hint="write [start, end] with start before end")


def _unknown(kind: str, name: str, known: list[str], at) -> Diagnostic:
    return diag("QAS710", f"keep_float names {kind} {name!r}, which the model does not have", at,
                hint=did_you_mean(name, known) or "see `nodes` in model_analysis.json for the names")


def _engine_only(spec: Spec) -> Iterator[Diagnostic]:
    if not spec.keep_float.empty:
        yield diag("QAS326", "keep_float needs engine qas: AutoSearchPro excludes at most one node (F7)",
                   spec.keep_float.path, hint="remove search.engine (the default is qas)", at_key=True)
    if spec.output.keep_models != "all":
        yield diag("QAS326", "keep_models needs engine qas: AutoSearchPro keeps every model",
                   spec.output.path + ("keep_models",), hint="remove search.engine (the default is qas)", at_key=True)
    if spec.search.max_failures is not None:
        yield diag("QAS326", "max_failures needs engine qas: AutoSearchPro stops at the first failing trial (F10)",
                   spec.search.path + ("max_failures",), hint="remove search.engine (the default is qas)", at_key=True)
