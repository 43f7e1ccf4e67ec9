"""Model intake pass: Spec in; QAS70x diagnostics out at the `model` line, from the model's own facts.

The facts (model_analysis.json) come from `intake.analysis(spec)`, cached per file version so that
the passes and `facts.derive` read the model once; `intake.read_checked` says what stops the reading.
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.check.intake_facts import analysis, read_checked
from compiler.check.resolved import spec_path
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec


def check(spec: Spec) -> Iterator[Diagnostic]:
    _facts, found = read_checked(spec_path(spec, spec.model), repr(spec.model), lambda _path: analysis(spec))
    for risk in found:
        yield diag(risk["code"], risk["message"], ("model",), hint=risk["hint"])
