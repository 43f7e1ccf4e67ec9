"""Engine autosearchpro: settings in; Quark's own AutoSearchPro.run() with qas's fixes, and best_config.json out.

Quark writes best_params.json, auto_search.log and quantized_model_<trial>.onnx (grid: quantized_model<index>.onnx)
into the output folder. Re-running resumes the sampler study up to n_trials complete; Quark re-runs the
grid stage of a two-stage search on every start.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from typing import Any

from . import contract
from .checks import fail
from .console import say
from .files import write_json
from .readers import make_reader, model_input_names
from .scoring import make_evaluator
from .settings import Settings
from .space import grid_space, nested_from_flat, pinned_stage2_space
from .study_file import check_study_file


def quark_config(settings: Settings, calib_reader: Any, eval_reader: Any) -> dict[str, Any]:
    """All 18 AutoSearchPro keys, explicit: Quark's defaults for absent keys differ from its presets."""
    return {
        "search_space": copy.deepcopy(settings.search_space),
        "n_trials": settings.n_trials,
        "n_jobs": 1,  # n_jobs > 1 always crashes in Quark 0.13 (F2)
        "output_dir": str(settings.here),
        "temp_dir": str(settings.path(settings.temp_dir)),
        "search_algo": settings.sampler,
        "search_evaluator": make_evaluator(settings.evaluator, settings.here),
        "search_metric": settings.metric,
        "direction": settings.direction,
        "base_framework": "onnx",
        "study_storage_db": settings.study_db,
        "load_study_if_exists": settings.resume,
        "study_name": settings.study_name,
        "model_input": str(settings.model_path),
        "calib_data_reader": calib_reader,
        "eval_data_reader": eval_reader,
        "two_stage_search": settings.two_stage,
        "plot_results": settings.plots,
    }


def searcher_class(settings: Settings) -> type:
    """AutoSearchPro with qas's fixes: seeded sampler (F9), records of every model, two-stage that keeps settings
    (F4)."""
    import optuna
    from quark.onnx.quantization.auto_search import AutoSearchPro

    class QasAutoSearchPro(AutoSearchPro):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__(config)
            self.n_trials = config["n_trials"]  # undo Quark's clamp to its "discrete size" (F3)
            self.qas_configs: dict[str, dict[str, Any]] = {}
            self.qas_scores: dict[str, float] = {}

        def _get_sampler(self) -> Any:
            return getattr(optuna.samplers, contract.SAMPLER_CLASSES[settings.sampler])(seed=settings.seed)

        def _onnx_quantize_model(self, params: dict[str, Any], model_output: str) -> None:
            self.qas_configs[model_output] = copy.deepcopy(params)
            super()._onnx_quantize_model(params, model_output)

        def _cal_diff(self, temp_output_path: str) -> float:
            score = float(super()._cal_diff(temp_output_path))
            self.qas_scores[temp_output_path] = score
            return score

        def _two_stage_search(self) -> dict[str, Any]:
            # Quark's version keeps only str and dict values of the stage-1 winner (F4); this keeps all.
            original = copy.deepcopy(self.search_space)
            stage1 = grid_space(original)
            self.search_space = stage1
            winner = self.grid_search(stage1)
            if "algorithms" not in original:
                return winner
            return pinned_stage2_space(original, winner)

    return QasAutoSearchPro


def existing_study(settings: Settings) -> Any:
    import optuna

    try:
        return optuna.load_study(study_name=settings.study_name, storage=settings.storage_url)
    except KeyError:
        return None


def complete_trials(study: Any) -> list[Any]:
    return [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]


def best_from_study(study: Any, sampler_space: dict[str, Any]) -> dict[str, Any]:
    best = study.best_trial
    return {
        "stage": contract.STAGE_SAMPLER,
        "config": nested_from_flat(sampler_space, best.params),
        "value": best.value,
        "trial_number": best.number,
        "model": f"quantized_model_{best.number}.onnx",
    }


def best_from_grid(settings: Settings, searcher: Any) -> dict[str, Any]:
    scores = searcher.qas_scores
    winner = min(scores, key=lambda path: scores[path])  # Quark's grid keeps the minimum too
    return {
        "stage": contract.STAGE_GRID,
        "config": searcher.qas_configs[winner],
        "value": scores[winner],
        "trial_number": None,
        "model": os.path.relpath(winner, settings.here),
    }


def float_score(settings: Settings, searcher: Any | None, study: Any | None) -> float | None:
    """The float model's score under the user evaluator, as it returned it: from Quark's baseline when it ran now
    (oriented, F6), kept in the study for a later run that has nothing left to search; None when unknown."""
    assert settings.evaluator is not None
    baseline = getattr(searcher, "base_model_output_metric", None)
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        score = float(baseline) if settings.evaluator["higher_is_better"] else -float(baseline)
        if study is not None:
            study.set_user_attr(contract.FLOAT_SCORE_ATTR, score)
        return score
    return study.user_attrs.get(contract.FLOAT_SCORE_ATTR) if study is not None else None


def main(settings: Settings, role: Any = None) -> int:
    """Run (or resume) Quark's search; the process exit code out."""
    here = settings.here
    os.chdir(here)  # Quark appends quantized_info.csv to the working directory
    stage2_file = settings.path(contract.STAGE2_SPACE_FILE)
    uses_sampler = settings.stage_totals()[1] > 0
    check_study_file(settings.path(settings.study_db))
    study = existing_study(settings) if settings.path(settings.study_db).exists() else None
    done = len(complete_trials(study)) if study is not None else 0
    if study is not None and not settings.resume:
        fail(f"study {settings.study_name!r} already exists in {settings.path(settings.study_db)}; "
             "set output.resume: true or move it away")
    remaining = max(settings.n_trials - done, 0)
    if uses_sampler and done:
        say(f"qas: resuming study {settings.study_name!r}: {done} of {settings.n_trials} trials done, "
            f"{remaining} to run")
    searcher = None  # stays None when a resumed search has no trials left to run
    if not uses_sampler or remaining > 0:
        input_names = model_input_names(settings.model_path)
        calib_reader = make_reader(settings.calibration, here, input_names)
        eval_reader = make_reader(settings.eval_data, here, input_names) if settings.eval_data is not None else None
        config = quark_config(settings, calib_reader, eval_reader)
        config["n_trials"] = remaining if uses_sampler else settings.n_trials
        searcher = searcher_class(settings)(config)
        if settings.two_stage and uses_sampler and done:
            say("qas: note: Quark re-runs the whole grid stage on every start")
        searcher.run()
        if uses_sampler:
            write_json(stage2_file, searcher.search_space)
            study = existing_study(settings)
    if uses_sampler:
        if study is None or not complete_trials(study):
            fail(f"study {settings.study_name!r} has no complete trial")
        sampler_space = (json.loads(stage2_file.read_text(encoding="utf-8")) if settings.two_stage
                         else settings.search_space)
        best = best_from_study(study, sampler_space)
        best["trials_complete"] = len(complete_trials(study))
    else:
        best = best_from_grid(settings, searcher)
        best["trials_complete"] = len(searcher.qas_scores)
    best.update({"metric": settings.metric, "direction": settings.direction, "spec_hash": settings.spec_hash,
                 "space_hash": settings.space_hash})
    if settings.evaluator is not None:
        best["objective"] = "float-model score minus quantized-model score, oriented by higher_is_better; minimized"
        best[contract.FLOAT_SCORE_ATTR] = float_score(settings, searcher, study)
    write_json(settings.best_config_path, best)
    temp_dir = settings.path(settings.temp_dir)
    if temp_dir.is_dir() and here in temp_dir.resolve().parents:
        shutil.rmtree(temp_dir)  # Quark says it removes temp_dir but does not (F13)
    say(f"qas: best value {best['value']:.6g} from {best['model']} ({best['stage']} stage); "
        f"see {contract.BEST_CONFIG_FILE}")
    return contract.EXIT_OK
