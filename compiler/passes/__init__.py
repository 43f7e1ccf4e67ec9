"""The compile passes, in the order they run: each is `check(Spec) -> Iterator[Diagnostic]`.

The environment pass (issue 3) slots in after `device`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..diagnostics import Diagnostic
from ..model import Spec
from . import budget, data, device, intake, metric, resolve, space

Pass = Callable[[Spec], Iterator[Diagnostic]]

PASSES: tuple[tuple[str, Pass], ...] = (
    ("resolve", resolve.check),
    ("space", space.check),
    ("device", device.check),
    ("intake", intake.check),
    ("data", data.check),
    ("budget", budget.check),
    ("metric", metric.check),
)
