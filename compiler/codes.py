"""The one registry of diagnostic codes: code id in, severity and a one-line title out.

Ranges: QAS1xx loading, QAS2xx schema, QAS3xx resolve and search space,
QAS4xx budget, QAS5xx metric/direction, QAS6xx device and environment,
QAS7xx model intake and data, QAS8xx writing outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class Code:
    id: str
    severity: Severity
    title: str


def _registry(*codes: Code) -> dict[str, Code]:
    table = {c.id: c for c in codes}
    assert len(table) == len(codes), "duplicate code id"
    return table


E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE

CODES: dict[str, Code] = _registry(
    # loading
    Code("QAS100", E, "YAML syntax error"),
    Code("QAS101", E, "duplicate key"),
    Code("QAS102", E, "spec file cannot be read"),
    Code("QAS103", E, "spec is not a mapping"),
    Code("QAS104", E, "spec file too large"),
    Code("QAS105", E, "spec nested too deep"),
    Code("QAS106", E, "too many nodes once aliases are expanded"),
    # schema
    Code("QAS201", E, "unknown key"),
    Code("QAS202", E, "missing required key"),
    Code("QAS203", E, "wrong type"),
    Code("QAS204", E, "value not allowed"),
    Code("QAS205", E, "value out of range or badly formed"),
    Code("QAS206", E, "conflicting or incomplete alternatives"),
    Code("QAS207", E, "unsupported spec version"),
    Code("QAS208", E, "non-finite number"),
    # resolve
    Code("QAS301", E, "file or folder not found"),
    Code("QAS302", E, "output path outside the workspace"),
    Code("QAS303", E, "override needs a preset"),
    # search space grammar
    Code("QAS310", E, "unknown search-space key"),
    Code("QAS311", E, "only_if names a key that does not exist"),
    Code("QAS312", E, "conditional group placed before its condition"),
    Code("QAS313", E, "continuous range outside a conditional group"),
    Code("QAS314", E, "group without only_if"),
    Code("QAS315", E, "grid-expanded entry must be a list"),
    Code("QAS316", E, "unknown choice string"),
    Code("QAS317", E, "NumIterLR entries must be [iterations, learning_rate] pairs"),
    Code("QAS318", E, "parameter Quark accepts but never applies"),
    Code("QAS319", E, "unknown parameter in a group"),
    Code("QAS320", E, "malformed range"),
    Code("QAS321", E, "empty choice list"),
    Code("QAS322", E, "exclude takes a single node name"),
    Code("QAS323", E, "malformed only_if"),
    Code("QAS324", E, "device field set in the space"),
    Code("QAS325", E, "choice value of an unsupported type"),
    Code("QAS326", E, "option needs engine qas"),
    # parallel and distributed search
    Code("QAS330", E, "database URL written in the spec"),
    Code("QAS331", E, "storage grace period not longer than its heartbeat"),
    Code("QAS332", E, "launch files need a shared storage (storage.url_env)"),
    Code("QAS333", E, "launch option does not fit the spec"),
    Code("QAS334", E, "storage.url_env names a variable the system or a launcher sets"),
    Code("QAS335", E, "kubernetes workdir is the root or a system folder"),
    Code("QAS336", E, "password written in the spec"),
    Code("QAS337", E, "output.mlflow.tracking_uri_env names a variable the system or a launcher sets"),
    # sensitivity-guided mixed precision (keep_float.blocks, .sensitivity, .search)
    Code("QAS340", E, "keep_float block pattern matches no node"),
    Code("QAS341", E, "keep_float block pattern is not a regular expression"),
    Code("QAS342", E, "keep_float.search needs a sampler stage"),
    Code("QAS343", E, "sensitivity base configuration is not in the search space"),
    Code("QAS344", E, "keep_float.search coverage range is empty"),
    Code("QAS345", E, "keep_float.search mixes its forms"),
    # objectives, tolerance and stop rules
    Code("QAS350", E, "tolerance the metric cannot take"),
    Code("QAS351", E, "several objectives with a sampler or stage that takes one"),
    Code("QAS352", E, "objectives without accuracy"),
    Code("QAS353", E, "stop at tolerance without a tolerance"),
    Code("QAS354", W, "latency measured by several workers"),
    Code("QAS355", W, "tolerance stop can never fire"),
    Code("QAS356", E, "search.prune where it cannot prune (several objectives, one score a model, sampler Grid)"),
    Code("QAS357", W, "quantized_fraction the same for every trial"),
    Code("QAS358", E, "keep_float.search strategy accuracy_control where its steps cannot decide"),
    # budget
    Code("QAS401", E, "more than 200 trials without opt-in"),
    Code("QAS402", N, "Quark's trial clamp neutralized"),
    Code("QAS403", E, "more trials than distinct configurations"),
    Code("QAS404", W, "Grid runs a different number of configurations than n_trials"),
    Code("QAS405", E, "not enough free disk space"),
    Code("QAS406", W, "large disk use"),
    Code("QAS407", W, "n_trials unused: two-stage search without algorithms"),
    # metric / direction
    Code("QAS501", E, "higher-is-better metric with Grid or two-stage search"),
    Code("QAS502", E, "labels missing for top1/top5, or given to a metric that takes none"),
    Code("QAS503", E, "top1/top5 under engine autosearchpro"),
    Code("QAS504", E, "labels do not fit the evaluation samples or the model"),
    # environment and device gating
    Code("QAS601", E, "package the script needs is not installed"),
    Code("QAS602", E, "package or Python version outside the supported range"),
    Code("QAS603", E, "device needs an onnxruntime execution provider that is missing"),
    Code("QAS604", E, "device needs a torch build for that accelerator"),
    Code("QAS605", W, "cpu search, but onnxruntime has GPU providers"),
    Code("QAS606", E, "device index beyond the target's GPUs"),
    # model intake and data
    Code("QAS701", E, "model is not a readable ONNX file"),
    Code("QAS702", E, "model is already quantized"),
    Code("QAS703", E, "external data missing"),
    Code("QAS704", E, "model over 2 GB without external data"),
    Code("QAS705", W, "opset below 13"),
    Code("QAS706", E, "no samples"),
    Code("QAS707", E, "sample does not fit the model inputs"),
    Code("QAS708", E, "sample file cannot be read"),
    Code("QAS709", E, "user file does not define the named reader or evaluator"),
    Code("QAS710", E, "keep_float names something the model does not have"),
    Code("QAS711", E, "no images in the image folder"),
    Code("QAS712", E, "image file cannot be used"),
    Code("QAS713", E, "image preprocessing is inconsistent"),
    Code("QAS714", E, "preprocessed images do not fit the model input"),
    Code("QAS715", E, "image folder cannot feed the model's inputs"),
    Code("QAS716", E, "external data outside the model's folder"),
    Code("QAS717", E, "per-channel weights on a model below opset 13"),
    # writing outputs
    Code("QAS801", E, "generated script was edited by hand"),
    Code("QAS802", E, "output file was not written by qas"),
    Code("QAS803", E, "output file cannot be written"),
    Code("QAS804", E, "output folder belongs to another spec"),
)


def severity_of(code_id: str) -> Severity:
    """Code id in, its registered severity out (KeyError for an unregistered code: a bug)."""
    return CODES[code_id].severity
