"""Keep-in-float pass: Spec in; QAS326 (the engine does not support it) and QAS710 (names not in the model) out.

Quark's AutoSearchPro excludes a single node at most (QUARK-FACTS F7); engine qas applies node names,
op types and (start, end) subgraphs as declared, so each name must exist in the model's main graph.
What each engine supports is its contract record (`runtime.contract.ENGINES`).
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.check.intake_facts import analysis
from compiler.check.resolved import engine
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec
from compiler.front.suggest import did_you_mean
from compiler.runtime.contract import DEFAULT_ENGINE, ENGINES, Engine


def check(spec: Spec) -> Iterator[Diagnostic]:
    record = engine(spec)
    yield from _unsupported(spec, record)
    if not record.keep_float or spec.keep_float.empty:
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


def _engines_with(feature: str) -> str:
    """The engines whose record supports `feature`, as 'qas' or 'a or b'."""
    return " or ".join(name for name, record in ENGINES.items() if getattr(record, feature))


def _unsupported(spec: Spec, record: Engine) -> Iterator[Diagnostic]:
    hint = f"remove search.engine (the default is {DEFAULT_ENGINE})"
    if not record.keep_float and not spec.keep_float.empty:
        yield diag("QAS326", f"keep_float needs engine {_engines_with('keep_float')}: AutoSearchPro excludes at most "
                             "one node (F7)", spec.keep_float.path, hint=hint, at_key=True)
    if not record.keep_models and spec.output.keep_models != "all":
        yield diag("QAS326", f"keep_models needs engine {_engines_with('keep_models')}: AutoSearchPro keeps every "
                             "model", (*spec.output.path, "keep_models"), hint=hint, at_key=True)
    if not record.max_failures and spec.search.max_failures is not None:
        yield diag("QAS326", f"max_failures needs engine {_engines_with('max_failures')}: AutoSearchPro stops at the "
                             "first failing trial (F10)", (*spec.search.path, "max_failures"), hint=hint, at_key=True)
    if not record.trial_timeout and spec.search.trial_timeout is not None:
        yield diag("QAS326", f"trial_timeout needs engine {_engines_with('trial_timeout')}: AutoSearchPro runs its "
                             "trials in its own loop", (*spec.search.path, "trial_timeout"), hint=hint, at_key=True)
