"""Model intake pass: Spec in; QAS70x diagnostics out at the `model` line, from the model's own facts.

The facts (model_analysis.json) come from `intake.analysis(spec)`, cached per file version so that
the passes and `facts.derive` read the model once.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..diagnostics import Diagnostic, diag
from ..intake import TWO_GB, analysis
from ..model import Spec
from ..onnx_proto import NotOnnx
from ..resolved import spec_path


def check(spec: Spec) -> Iterator[Diagnostic]:
    at = ("model",)
    path = spec_path(spec, spec.model)
    if path.stat().st_size > TWO_GB:
        yield diag("QAS704", f"{spec.model!r} is {path.stat().st_size / 1024**3:.1f} GiB in one file; protobuf cannot "
                             "read models over 2 GB without external data", at,
                   hint="save it with onnx.save(model, path, save_as_external_data=True)")
        return
    try:
        facts = analysis(spec)
    except NotOnnx:
        yield diag("QAS701", f"{spec.model!r} is not a readable ONNX model (protobuf cannot parse it as a ModelProto)", at,
                   hint="check that the path names the .onnx file itself and that it is not truncated")
        return
    except OSError as exc:
        yield diag("QAS701", f"{spec.model!r} cannot be read: {exc.strerror or exc}", at)
        return
    for risk in facts["risks"]:
        yield diag(risk["code"], risk["message"], at, hint=risk["hint"])
