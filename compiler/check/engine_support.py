"""What the spec's engine refuses: a Spec, a feature (contract.FEATURES), what the spec wrote and where in; a QAS326
diagnostic saying which engines offer it and why this one does not out, or None when the engine offers it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from compiler.check.resolved import engine
from compiler.diagnostics import Diagnostic, YamlPath, diag
from compiler.front.model import Spec
from compiler.runtime.contract import DEFAULT_ENGINE, engines_supporting

HINT = f"remove search.engine (the default is {DEFAULT_ENGINE})"


def refused(spec: Spec, feature: str, what: str, at: YamlPath) -> Diagnostic | None:
    """QAS326 at `at` (the key) when the spec's engine does not offer `feature`, which `what` (as written) needs."""
    record = engine(spec)
    if record.supports(feature):
        return None
    return diag("QAS326", f"{what} needs engine {engines_supporting(feature)}: {record.why_not(feature)}", at,
                hint=HINT, at_key=True)


def refusals(spec: Spec, written: Iterable[tuple[bool, str, str, YamlPath]]) -> Iterator[Diagnostic]:
    """(present in the spec, feature, what the spec wrote, where) rows in; a QAS326 for each present one the spec's
    engine refuses out."""
    for present, feature, what, at in written:
        if present and (found := refused(spec, feature, what, at)):
            yield found
