"""Model intake pass: Spec in; QAS70x diagnostics out at the `model` line, from the model's own facts.

The facts (model_analysis.json) come from `analysis(spec)`, cached per file version so that the pass
and lowering read the model once.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic, diag
from ..intake import TWO_GB, analyze_model, risks
from ..model import Spec
from ..onnx_proto import NotOnnx
from .resolve import spec_path


@lru_cache(maxsize=8)
def _cached(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    facts = analyze_model(Path(path))
    facts["risks"] = risks(facts)
    return facts


def analysis(spec: Spec) -> dict[str, Any]:
    """The model's facts with their risks; raises NotOnnx for a file that is not a model."""
    path = spec_path(spec, spec.model)
    stat = path.stat()
    return _cached(str(path), stat.st_mtime_ns, stat.st_size)


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
