"""Quantizing one configuration: a nested Quark config and an output path in; a quantized ONNX model on disk out."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any


def float_exclusions(model_path: Path, keep_float: dict[str, Any]) -> list[Any]:
    """keep_float as Quark's QConfig.exclude: node names (op types expanded to their nodes) and (start, end)
    subgraphs."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    names = list(keep_float["nodes"])
    names += [n.name for n in graph.node if n.op_type in keep_float["op_types"] and n.name not in names]
    return names + [([start], [end]) for start, end in keep_float["subgraphs"]]


def quark_qconfig(config: dict[str, Any], exclusions: list[Any]) -> Any:
    """A nested config in, Quark's QConfig out: AutoSearchPro._onnx_quantize_model's mapping, with exclusion
    applied (F7)."""
    from quark.onnx import QConfig, QLayerConfig
    from quark.onnx.quantization.auto_search import AutoSearchPro
    from quark.onnx.quantization.auto_search.qconfig_mapping import (
        DATA_TYPE,
        ONNX_ACTIVATION_WEIGHT,
        ONNX_ALGORITHM,
        ONNX_CALIBMETHOD,
        QUANT_GRANULARITY,
        SCALE_TYPE,
    )

    params = copy.deepcopy(config)
    enums = {"calibration_method": ONNX_CALIBMETHOD, "scale_type": SCALE_TYPE,
             "quant_granularity": QUANT_GRANULARITY, "data_type": DATA_TYPE}

    def tensor_spec(kind: str) -> Any:
        name = params.pop(kind, None)
        fields = params.pop(f"{kind}_params", {})
        fields = {k: enums[k][v] if k in enums else v for k, v in fields.items()}
        return ONNX_ACTIVATION_WEIGHT[name](**fields)

    activation, weight = tensor_spec("activation"), tensor_spec("weight")
    algorithms = []
    algorithm = params.pop("algorithms", None)
    algorithm_params = params.pop(f"{algorithm}_params", {}) if algorithm in ("adaround", "adaquant") else {}
    params.pop("adaround_params", None)
    params.pop("adaquant_params", None)
    if algorithm is not None:
        if algorithm not in ONNX_ALGORITHM:
            raise ValueError(f"algorithm {algorithm!r} is not one Quark supports")
        algorithms.append(ONNX_ALGORITHM[algorithm](**AutoSearchPro.process_joint_numiter_lr(algorithm_params)))
    if params.pop("cle_algo", None) == "cle":
        algorithms.append(ONNX_ALGORITHM["cle"](**params.pop("cle_params", {})))
    params.pop("cle_params", None)
    params.pop("exclude", None)  # refused at compile time: keep_float replaces it
    return QConfig(
        QLayerConfig(activation=activation, weight=weight),
        specific_layer_config=params.pop("specific_layer_config", None),
        layer_type_config=params.pop("layer_type_config", None),
        exclude=exclusions,
        use_external_data_format=params.pop("use_external_data_format", False),
        algo_config=algorithms,
        **params,
    )


class QuarkQuantizer:
    """Quantizes configurations of one float model with Quark's ModelQuantizer and one calibration reader; each
    quantization's steps (seconds, and whether calibration ran) out."""

    def __init__(self, model_path: Path, calib_reader: Any, exclusions: list[Any], process: Any = None,
                 cache: Any = None) -> None:
        self.model_path = model_path
        self.calib_reader = calib_reader
        self.exclusions = exclusions
        self.ranking: Any = None  # sensitivity.Ranking, when the space searches keep_float
        self.process = process  # a QuantizerProcess: Quark runs there, where a stop or a crash can end it; None: here
        self.cache = cache  # a CalibrationCache (search.calibration_cache), or None: every quantization calibrates

    def __call__(self, config: dict[str, Any], output: Path) -> dict[str, Any]:
        """A trial's config (with its `keep_float` search choice, if any) in; the model quantized with the fixed
        keep_float plus the chosen prefix of the sensitivity ranking left in float; its steps out."""
        config = dict(config)
        choice = config.pop("keep_float", None)
        extra = self.ranking.float_nodes(choice)["nodes"] if choice is not None and self.ranking is not None else []
        steps = self.quantize(config, output, self.exclusions + [n for n in extra if n not in self.exclusions])
        if extra:
            from .sensitivity_graph import warn_if_quantized

            warn_if_quantized(self.model_path, output, extra)
        return steps

    def quantize(self, config: dict[str, Any], output: Path, exclusions: list[Any]) -> dict[str, Any]:
        """One quantization (here, or in the child process); its steps out (step_clock.StepClock.steps)."""
        if self.process is not None:
            return self.process(config, output, exclusions)
        from quark.onnx import ModelQuantizer

        from .step_clock import CLOCK

        def run(save_and_restore: Path | None) -> None:
            qconfig = quark_qconfig(config, exclusions)
            if save_and_restore is not None:
                qconfig.extra_options["SaveAndRestore"] = str(save_and_restore)
            self.calib_reader.reset_iter()
            ModelQuantizer(qconfig).quantize_model(
                model_input=str(self.model_path), model_output=str(output), calibration_data_reader=self.calib_reader)

        with CLOCK.measuring() as steps:
            if self.cache is None:
                run(None)
            else:
                steps["calibration_cached"] = not self.cache.quantize(config, exclusions, run)
                steps["calibration_derived"] = self.cache.derived
        return steps


def quark_in_child(settings: Any) -> Any:
    """In the quantizer's child process (quantizer_process.py): the settings in; Quark's quantizer over a calibration
    reader of its own out (built here from the settings, so the model and the samples never cross the pipe)."""
    import os

    from quark import __version__ as quark_version
    from quark.onnx.calibration import CachedDataReader

    from .calibration_cache import RANGES_SAVED, CalibrationCache, cache_folder, samples_digest
    from .histogram_cache import HISTOGRAMS
    from .preprocess_cache import PREPROCESS
    from .readers import make_reader, model_input_names
    from .step_clock import CLOCK

    os.chdir(settings.here)  # Quark appends quantized_info.csv to the working directory
    reader = CachedDataReader(make_reader(settings.calibration, settings.here, model_input_names(settings.model_path)))
    cache = (CalibrationCache(cache_folder(settings.here), settings.model_sha256, samples_digest(reader), quark_version)
             if settings.calibration_cache else None)
    CLOCK.install()
    RANGES_SAVED.install()
    HISTOGRAMS.install()
    PREPROCESS.enabled = bool(settings.calibration_cache)  # the same switch: calibration ranges and pre-processing
    PREPROCESS.install()
    return QuarkQuantizer(settings.model_path, reader, [], cache=cache).quantize
