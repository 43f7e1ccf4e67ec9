"""Rebuilding recorded trials (`qas export`, the script's --export): settings and which trials in; each trial's model
quantized again from its recorded configuration (the calibration cache reused when there is one), scored, and compared
with the value the study recorded, out.

Works whatever keep_models removed: only the study's record of the trial (its nested config, with its keep_float
choice) is read. The study is only read, so an export may run beside the search.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import contract
from .checks import fail
from .console import say, warn


@dataclass(frozen=True)
class ExportRequest:
    """--export N [--export-stage grid|sampler] [--export-to PATH], or --export-pareto."""

    trial: int | None
    stage: str | None  # None: the sampler stage, or the grid stage when the search ran only a grid
    to: str | None  # None: exported_<stage>_<N>.onnx in the output folder
    pareto: bool = False


def recorded_trials(settings: Any, request: ExportRequest) -> list[tuple[str, Any]]:
    """The (stage, frozen trial) pairs the request names, read from the study; stops with a message when there is
    none to export."""
    import optuna

    from .objectives import pareto_front
    from .storage import open_storage_for

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage_for(settings)
    names = {contract.STAGE_SAMPLER: settings.study_name, contract.STAGE_GRID: settings.grid_study_name}
    existing = set(optuna.get_all_study_names(storage))

    def trials_of(stage: str) -> list[Any]:
        if names[stage] not in existing:
            return []
        return optuna.load_study(study_name=names[stage], storage=storage).get_trials(deepcopy=False)

    if request.pareto:
        if not settings.multi_objective:
            fail("--pareto needs a search with several objectives (search.objectives); export one trial with "
                 "--trial N")
        complete = [t for t in trials_of(contract.STAGE_SAMPLER) if t.state.name == "COMPLETE"]
        if not complete:
            fail("no sampler trial has completed yet: there is no Pareto front to export")
        return [(contract.STAGE_SAMPLER, t) for t, _ in pareto_front(settings, complete)]
    stage = request.stage or (contract.STAGE_GRID if settings.grid_only else contract.STAGE_SAMPLER)
    found = [t for t in trials_of(stage) if t.number == request.trial]
    if not found:
        fail(f"the {stage} stage has no trial {request.trial} (see `qas report` for the trials)")
    trial = found[0]
    if contract.ATTR_CONFIG not in trial.user_attrs:
        fail(f"{stage} trial {request.trial} has no recorded configuration ({trial.state.name.lower()}: "
             "it never started quantizing)")
    return [(stage, trial)]


def target_path(settings: Any, request: ExportRequest, stage: str, trial: Any) -> Path:
    if request.to is not None and not request.pareto:
        return Path(request.to).resolve()
    return settings.path(f"exported_{stage}_{trial.number}.onnx")


def comparison(recorded: float | None, rebuilt: float, state: str = "COMPLETE") -> tuple[bool, str]:
    """The value the study recorded (None: the trial did not complete) and the rebuilt model's in; (equal, the
    sentence that says so) out."""
    if recorded is None:
        why = "search.prune stopped it before its last sample" if state == "PRUNED" else "it did not complete"
        return False, f"scores {rebuilt:.9g}; the study recorded no score for it ({why})"
    if rebuilt == recorded:
        return True, f"scores {rebuilt:.9g}, exactly the value the study recorded"
    return False, (f"scores {rebuilt:.9g}, the study recorded {recorded:.9g} (differs by {rebuilt - recorded:+.3g}): "
                   "fast fine-tuning (AdaRound, AdaQuant) trains with random batches, and changed data, a changed "
                   "evaluator or another onnxruntime build also move a score")


def export(settings: Any, request: ExportRequest) -> int:
    """Quantize, score and compare each requested trial; EXIT_OK when every one scores what the study recorded, else
    EXIT_FAILED (the models are written either way)."""
    from .engine_qas import prepared_readers
    from .quantize import QuarkQuantizer, float_exclusions, quark_in_child
    from .quantizer_process import QuantizerProcess
    from .scoring import Scorer, load_labels, make_evaluator

    chosen = recorded_trials(settings, request)
    process = QuantizerProcess(quark_in_child, settings)
    process.start()
    try:
        calib, evaluation = prepared_readers(settings)
        labels = load_labels(settings.labels, settings.here, settings.eval_data or settings.calibration)
        scorer = Scorer(settings.metric, make_evaluator(settings.evaluator, settings.here), evaluation,
                        settings.device, labels)
        scorer.score_float(settings.model_path)
        quantizer = QuarkQuantizer(settings.model_path, calib, float_exclusions(settings.model_path,
                                                                                settings.keep_float), process)
        if any("keep_float" in trial.user_attrs[contract.ATTR_CONFIG] for _, trial in chosen):
            from . import sensitivity

            quantizer.ranking = sensitivity.ensure(settings, calib, evaluation, quantizer.exclusions,
                                                   quantizer.quantize)
        all_equal = True
        for stage, trial in chosen:
            path = target_path(settings, request, stage, trial)
            path.parent.mkdir(parents=True, exist_ok=True)
            quantizer(trial.user_attrs[contract.ATTR_CONFIG], path)
            recorded = trial.values[0] if trial.values and trial.state.name == "COMPLETE" else None
            equal, said = comparison(recorded, scorer.score(path), trial.state.name)
            all_equal = all_equal and equal
            (say if equal else warn)(f"qas: exported {stage} trial {trial.number} to {path}: {said}")
        return contract.EXIT_OK if all_equal else contract.EXIT_FAILED
    finally:
        process.close()
