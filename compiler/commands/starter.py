"""Starter specs for `qas init`: a float model's facts, its path from the spec and a device in; spec.yaml text out.

The choices (name, preset, fine-tuning length, what samples the model takes) are made here, the
wording is templates/spec.yaml.j2's. Text from the model (input names, dim names, file names)
reaches the file only JSON-escaped inside comments or as a checked YAML scalar, never raw.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from pathlib import PurePath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from compiler.back.render import environment
from compiler.check.presets import preset_config
from compiler.check.resolved import deep_merge
from compiler.check.spacemath import count_configs, stage1_space
from compiler.front import schema
from compiler.resources import load_schema

SPEC_FILE = "spec.yaml"  # written into the current directory unless --output says otherwise
CALIB_FOLDER = "data/calib"  # relative to the spec
CALIB_LIMIT = 64
N_TRIALS = 10
SEED = 0
OUTPUT_DIR = "autosearch_output"
METRIC = "L2"
# On a CPU the presets' 3000-20000 AdaRound/AdaQuant iterations take hours per trial on a real model;
# 1000 is Quark's own default when a space names no num_iterations.
CPU_NUM_ITERATIONS = {"type": "int", "low": 200, "high": 1000, "step": 200}
# The starter search's time budget (search.stop.timeout): a first result in minutes, whatever the model's size;
# the full budget is the next step. `qas init --minutes N` changes it.
DEFAULT_MINUTES = 20
PER_CHANNEL_OPSET = 13  # DequantizeLinear's axis (per-channel scales) exists from opset 13
_NAME = re.compile(load_schema("spec.schema.json")["properties"]["name"]["pattern"])
_DEVICE = re.compile(load_schema("spec.schema.json")["properties"]["device"]["pattern"])
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def device_problem(device: str) -> str | None:
    """A --device value in; why it is not one the spec takes, or None."""
    if _DEVICE.match(device):
        return None
    return f"--device {json.dumps(device)} is not cpu, cuda:N or rocm:N (for example cuda:0)"


def spec_name(model_file: str) -> str:
    """A model file name in; a search name matching the schema's pattern out ('ResNet-50 v1.onnx' -> 'ResNet_50_v1')."""
    stem = PurePath(model_file).stem
    ascii_stem = unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode("ascii")
    name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", ascii_stem)).strip("_")
    if not name[:1].isalpha():
        name = f"model_{name}".rstrip("_")
    name = name[:64].rstrip("_")
    assert _NAME.match(name), name
    return name


def yaml_value(text: str) -> str:
    """A string in; a YAML scalar that reads back as exactly that string out: plain when it can be, else JSON-quoted."""
    if text and text == text.strip():
        try:
            if YAML(typ="safe", pure=True).load(f"k: {text}\n") == {"k": text}:
                return text
        except YAMLError:
            pass
    return json.dumps(text, ensure_ascii=True)


def _shown(text: str) -> str:
    """Model text for a comment: an identifier as it is, anything else JSON-quoted (one line, ASCII)."""
    return text if _IDENT.match(text) else json.dumps(text, ensure_ascii=True)


def describe_input(model_input: dict[str, Any]) -> dict[str, str]:
    """An input of model_analysis.json in; comment text out: its quoted name, dtype, shape ('[batch, 3, 224, 224]',
    unnamed dynamic dims as '?') and which dims are dynamic ('batch', 'dims 0, 1'; empty when none)."""
    shape = model_input["shape"]
    described = {"name": json.dumps(model_input["name"], ensure_ascii=True), "dtype": model_input["dtype"],
                 "shape": "of any shape (the model declares none)", "dynamic": ""}
    if shape is None:
        return described
    dims, named, unnamed = [], [], []
    for axis, dim in enumerate(shape):
        if isinstance(dim, int) and dim > 0:
            dims.append(str(dim))
        elif isinstance(dim, str) and dim:
            dims.append(_shown(dim))
            named.append(_shown(dim))
        else:
            dims.append("?")
            unnamed.append(str(axis))
    dynamic = named + ([("dim " if len(unnamed) == 1 else "dims ") + ", ".join(unnamed)] if unnamed else [])
    return described | {"shape": f"shape [{', '.join(dims)}]", "dynamic": ", ".join(dynamic)}


def suggested_search(device: str) -> dict[str, Any]:
    """The declared device in; the preset, an override (or None), the grid stage's size and the fine-tuning
    iteration ranges (the preset's, and the ones searched) out.

    The preset is about where the model will run, which the search device does not say: A8W8_SEARCH (int8
    with float scales) is what onnxruntime runs on CPUs and GPUs; the spec names XINT8_SEARCH and A16W8_SEARCH
    as the choices for an AMD NPU. The device sets how long fine-tuning may be: short on a CPU, the preset's
    own on a GPU.
    """
    preset = "A8W8_SEARCH"
    config = preset_config(preset)
    override = None
    if device == "cpu":
        override = {"adaround_params": {"num_iterations": dict(CPU_NUM_ITERATIONS)},
                    "adaquant_params": {"num_iterations": dict(CPU_NUM_ITERATIONS)}}
    space = deep_merge(config["search_space"], override or {})
    grid = count_configs(stage1_space(space)) if config["two_stage_search"] else 0
    preset_range = config["search_space"]["adaround_params"]["num_iterations"]
    searched = space["adaround_params"]["num_iterations"]
    return {"preset": preset, "override": override, "grid_configs": grid, "space": space,
            "preset_iterations": (preset_range["low"], preset_range["high"]),
            "iterations": (searched["low"], searched["high"])}


def full_search_seconds(facts: dict[str, Any], search: dict[str, Any], n_trials: int,
                        device: str) -> tuple[float, float]:
    """The model's facts, the suggested search and its trials in; compile's rough estimate (compiler/back/cost.py) of
    the whole search without a time budget out, (least, most) seconds, with CALIB_LIMIT calibration samples assumed
    (the folder is empty when init runs)."""
    from compiler.back.cost import FINETUNED_OPS, Workload, constants, finetune_classes, finetune_s, plain_s, startup_s

    c = constants()
    counts = facts["op_counts"]
    w = Workload(model_mb=facts["size_bytes"] / 1e6, nodes=sum(counts.values()),
                 layers=sum(counts.get(op, 0) for op in FINETUNED_OPS), calibration=CALIB_LIMIT,
                 evaluation=CALIB_LIMIT, assumed=True, gpu=device != "cpu")
    plain = plain_s(w, c)
    classes = finetune_classes(search["space"])
    low = [plain + finetune_s(w, a, f.iterations[0], f.data_size, c) for a, f in classes.items()]
    high = [plain + finetune_s(w, a, f.iterations[1], f.data_size, c) for a, f in classes.items()]
    grid = search["grid_configs"] * plain
    choices = search["space"].get("algorithms") or []
    cheapest = plain if not classes or any(a not in classes for a in choices) else min(low)  # as cost.estimate
    return (startup_s(w, False, c) + grid + n_trials * cheapest,
            startup_s(w, bool(classes), c) + grid + n_trials * max([plain, *high]))


def opset_below_per_channel(facts: dict[str, Any]) -> int | None:
    """The model's default-domain opset when it is below 13 (per-channel quantization needs 13), else None."""
    opset = facts["opsets"].get("ai.onnx")
    return opset if opset is not None and opset < PER_CHANNEL_OPSET else None


def starter_text(facts: dict[str, Any], model: str, spec_file: str, device: str,
                 minutes: int | None = DEFAULT_MINUTES, converted_from: str | None = None) -> str:
    """Model facts (intake.analyze_model), the model's path relative to the spec, the spec's file name, the
    device, the time budget in minutes (None: none) and the original model when this one is its opset-13 copy in;
    the commented spec out. Raises AssertionError if the text would not pass the schema (a bug)."""
    assert facts["inputs"], "a model without inputs has nothing to calibrate"
    name = spec_name(facts["file"])
    inputs = [describe_input(i) for i in facts["inputs"]]
    search = suggested_search(device)
    external = [e["location"] for e in facts["external_data"]]
    from compiler.back.cost import duration

    low, high = full_search_seconds(facts, search, N_TRIALS, device)
    text = environment().get_template("spec.yaml.j2").render(
        minutes=minutes, full_low=duration(low), full_high=duration(high), fits=bool(minutes) and high <= minutes * 60,
        converted_from=json.dumps(converted_from, ensure_ascii=True) if converted_from else None,
        model_file=_shown_file(facts["file"]), spec_file=_command_word(spec_file), name=name,
        model=yaml_value(model), external=[json.dumps(e, ensure_ascii=True) for e in external],
        inputs=inputs, calib_folder=CALIB_FOLDER, calib_limit=CALIB_LIMIT, metric=METRIC, search=search,
        n_trials=N_TRIALS, seed=SEED, device=device, gpu=device != "cpu", output_dir=OUTPUT_DIR)
    problems = text_problems(text)
    assert not problems, problems
    return text


def _shown_file(file_name: str) -> str:
    """A file name for a comment: as it is when plain, else JSON-quoted (one line, ASCII)."""
    return file_name if re.match(r"^[A-Za-z0-9_.+-]+$", file_name) else json.dumps(file_name, ensure_ascii=True)


def _command_word(file_name: str) -> str:
    """A file name as a shell word in a comment: shell-quoted, or SPEC when it would not fit on one line."""
    return shlex.quote(file_name) if file_name.isprintable() else "SPEC"


def text_problems(text: str) -> list[str]:
    """Spec text in; why it would not load or not pass the schema (empty when it does) out."""
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        return [f"YAML: {exc}"]
    return [d.message for d in schema.check(data)]
