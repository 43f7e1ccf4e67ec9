"""The compile passes, in the order they run: a target Environment in, `(name, check(Spec) -> Iterator[Diagnostic])`
pairs out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from ..diagnostics import Diagnostic
from ..environment import Environment
from ..model import Spec
from . import (
    budget,
    data,
    device,
    environment,
    exclusion,
    intake,
    metric,
    objectives,
    opset,
    parallel,
    resolve,
    sensitivity,
    space,
)

Pass = Callable[[Spec], Iterator[Diagnostic]]


def passes(env: Environment) -> tuple[tuple[str, Pass], ...]:
    """Only the environment pass depends on where the script will run."""
    return (
        ("resolve", resolve.check),
        ("parallel", parallel.check),
        ("space", space.check),
        ("device", device.check),
        ("environment", partial(environment.check, env=env)),
        ("intake", intake.check),
        ("opset", opset.check),
        ("data", data.check),
        ("exclusion", exclusion.check),
        ("sensitivity", sensitivity.check),
        ("budget", budget.check),
        ("metric", metric.check),
        ("objectives", objectives.check),
    )
