"""Device pass: Spec in; QAS324 out where the user set a device field the declared device owns.

The declared `device` is the only device: lowering writes it into every AdaRound/AdaQuant
optim_device and infer_device (QUARK-FACTS F12). Whether that device exists is the
environment pass's question.
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.check.spacemath import ALGORITHM_GROUPS, DEVICE_FIELDS
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec


def check(spec: Spec) -> Iterator[Diagnostic]:
    s = spec.search
    written, base = (s.space, (*s.path, "space")) if s.space is not None else (s.override or {}, (*s.path, "override"))
    for group in ALGORITHM_GROUPS.values():
        body = written.get(group)
        if not isinstance(body, dict):
            continue
        for f in DEVICE_FIELDS:
            if f in body:
                yield diag("QAS324", f"{group}.{f} is set from `device` ({spec.device}); do not set it in the space",
                           (*base, group, f), hint="remove it and change `device` instead", at_key=True)
