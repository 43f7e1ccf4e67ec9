"""The compile passes, in the order they run: a target Environment in, `(name, check(Spec) -> Iterator[Diagnostic])`
pairs out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from compiler.check.passes import (
    budget,
    data,
    device,
    environment,
    exclusion,
    intake,
    keep_float,
    metric,
    objective_rules,
    opset,
    parallel,
    resolve,
    space_grammar,
)
from compiler.check.target_env import Environment
from compiler.diagnostics import Diagnostic
from compiler.front.model import Spec

Pass = Callable[[Spec], Iterator[Diagnostic]]


def passes(env: Environment) -> tuple[tuple[str, Pass], ...]:
    """Only the environment pass depends on where the script will run."""
    return (
        ("resolve", resolve.check),
        ("parallel", parallel.check),
        ("space", space_grammar.check),
        ("device", device.check),
        ("environment", partial(environment.check, env=env)),
        ("intake", intake.check),
        ("opset", opset.check),
        ("data", data.check),
        ("exclusion", exclusion.check),
        ("sensitivity", keep_float.check),
        ("budget", budget.check),
        ("metric", metric.check),
        ("objectives", objective_rules.check),
    )
