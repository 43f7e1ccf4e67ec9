"""Opset pass: Spec in; QAS717 out when the space can draw per-channel weights for a model below opset 13.

Quark quantizes weights per channel when `weight_params.quant_granularity` is Channel (maps.py sets
`per_channel` from the weight spec only; an activation's Channel is not per-channel), and its QDQ
quantizers then raise "Per-Channel support with QDQ format requires onnx opset version 13 or above" in
every trial that draws it, after the float model was scored. `ConvertOpsetVersion` (a top-level space key
Quark passes as an extra option) converts the model before quantizing: every choice 13 or above is a fix.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from compiler.check.intake_facts import analysis
from compiler.check.passes.space_grammar import Locator
from compiler.check.resolved import merged_space
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec

MIN_OPSET = 13  # QDQ per-channel (axis on QuantizeLinear/DequantizeLinear) arrived in opset 13


def check(spec: Spec) -> Iterator[Diagnostic]:
    opset = analysis(spec)["opsets"].get("ai.onnx")
    if opset is None or opset >= MIN_OPSET:
        return
    space = merged_space(spec)
    group = space.get("weight_params")
    choices = group.get("quant_granularity") if isinstance(group, dict) else None
    if not isinstance(choices, list) or "Channel" not in choices or _converts(space.get("ConvertOpsetVersion")):
        return
    where = Locator(spec)("weight_params", "quant_granularity", choices.index("Channel"))
    from_preset = where == (*spec.search.path, "preset")
    yield diag("QAS717", f"weight_params.quant_granularity can draw Channel (per-channel weights), but the model's "
                         f"opset is {opset}: Quark needs opset {MIN_OPSET} for per-channel QDQ and fails every trial "
                         "that draws it"
                         + (f" (Channel comes from preset {spec.search.preset})" if from_preset else ""),
               where, hint=_hint(spec, choices))


def _converts(value: Any) -> bool:
    """ConvertOpsetVersion choices that all convert the model to opset 13 or above before quantizing."""
    return (isinstance(value, list) and bool(value)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= MIN_OPSET for v in value))


def convert_command(model: str, external: bool) -> tuple[str, str]:
    """The one-liner converting `model` (a path as the spec writes it) to opset 13, and the file it writes."""
    path = PurePath(model)
    target = str(path.with_name(f"{path.stem}_opset{MIN_OPSET}{path.suffix or '.onnx'}"))
    save = ", save_as_external_data=True" if external else ""
    code = (f"import onnx; from onnx import version_converter as v; "
            f"onnx.save(v.convert_version(onnx.load({json.dumps(model)}), {MIN_OPSET}), {json.dumps(target)}{save})")
    return f"python -c {shlex.quote(code)}", target


def _hint(spec: Spec, choices: list[Any]) -> str:
    command, target = convert_command(spec.model, bool(analysis(spec)["external_data"]))
    rest = [c for c in choices if c != "Channel"] or ["Tensor"]
    keep = f"quant_granularity: [{', '.join(str(c) for c in rest)}]"
    drop = (f"set search.space.weight_params.{keep}" if spec.search.space is not None else
            f"write search.override: {{weight_params: {{{keep}}}}}")
    return (f"convert the model (in the spec's folder): {command}, then set model: {target}; or drop Channel: {drop}; "
            f"or let Quark convert it first: ConvertOpsetVersion: [{MIN_OPSET}] in the space")
