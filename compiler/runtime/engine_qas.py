"""Engine qas: settings and the process's role in; a search over Quark's quantizer driven by qas's own Optuna loop
(search.py), run alone, as N workers, or as one worker, and the winner's files (results.py) out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import contract
from .checks import fail
from .console import say, warn
from .latency import model_size
from .results import write_best, write_plots
from .roles import Role
from .search import Search
from .sensitivity import choice_text
from .settings import Settings
from .space import stage_configs
from .workers import run_workers


def prepared_readers(settings: Settings) -> tuple[Any, Any]:
    """Quark's CachedDataReader over the calibration (and evaluation) readers; stops at once if one fails."""
    from quark.onnx.calibration import CachedDataReader

    from .readers import make_reader, model_input_names

    input_names = model_input_names(settings.model_path)
    try:
        calib = CachedDataReader(make_reader(settings.calibration, settings.here, input_names))
        evaluation = (CachedDataReader(make_reader(settings.eval_data, settings.here, input_names))
                      if settings.eval_data is not None else calib)
    except SystemExit:
        raise
    except Exception as error:  # noqa: BLE001 - the user's reader: say so, stop before any trial
        fail(f"the data reader failed before any trial: {type(error).__name__}: {error}")
    return calib, evaluation


def run_stages(search: Search) -> int | None:
    """Quark's quantizer in a child process (started first: it imports Quark while the float model is scored), then
    the stages; EXIT_INTERRUPTED after Ctrl-C, else None. The child ends with them, however they end."""
    from .quantize import quark_in_child
    from .quantizer_process import QuantizerProcess

    process = QuantizerProcess(quark_in_child, search.settings)
    process.start()
    try:
        return _run_stages(search, process)
    finally:
        process.close()


def _run_stages(search: Search, process: Any) -> int | None:
    """Readers, the float score, Quark's quantizer (working in `process`), then the stages."""
    from quark.onnx.quantization.auto_search.config_generator import (
        generate_all_configs,
    )

    from . import sensitivity
    from .quantize import QuarkQuantizer, float_exclusions
    from .scoring import Scorer, load_labels, make_evaluator

    settings = search.settings
    calib, evaluation = prepared_readers(settings)
    try:
        labels = load_labels(settings.labels, settings.here, settings.eval_data or settings.calibration)
    except Exception as error:  # noqa: BLE001 - compile checked them; a file changed since is said, not a traceback
        fail(f"the labels could not be read: {type(error).__name__}: {error}")
    scorer = Scorer(settings.metric, make_evaluator(settings.evaluator, settings.here), evaluation, settings.device,
                    labels)
    if settings.prune and scorer.evaluator is not None and not hasattr(scorer.evaluator, "samples"):
        fail(f"search.prune needs one score a sample, and evaluator {settings.evaluator['function']} returns one score "
             "a model (compile could not tell: the name is bound at run time); make it yield one score per "
             "evaluation sample, or remove search.prune")
    try:
        scorer.score_float(settings.model_path)
    except Exception as error:  # noqa: BLE001 - the float model must score, or no trial can
        fail(f"scoring the float model failed, so no trial could be scored: {type(error).__name__}: {error}")
    if settings.evaluator is not None:  # the baseline is oriented (F6): back to what the evaluator returned
        search.record_float_score(scorer.baseline if settings.evaluator["higher_is_better"] else -scorer.baseline)
    elif scorer.float_score is not None:  # top1/top5: the float model's accuracy
        search.record_float_score(scorer.float_score)
    exclusions = float_exclusions(settings.model_path, settings.keep_float)
    quantizer = QuarkQuantizer(settings.model_path, calib, exclusions, process)
    if settings.keep_float_search:  # the ranking first: each trial keeps a prefix of it in float
        quantizer.ranking = sensitivity.ensure(settings, calib, evaluation, exclusions, quantizer.quantize)
    meter = float_objectives(search, evaluation)
    record_floor(search, calib, evaluated_samples(scorer, evaluation))
    if quantizer.ranking is not None:
        granular_ranking(search, quantizer.ranking)
    search.attach(quantizer, scorer.score, meter, quantizer.ranking.float_nodes if quantizer.ranking else None)
    configs = stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                            generate_all_configs)
    return search.run(configs)


def evaluated_samples(scorer: Any, evaluation: Any) -> int | None:
    """How many samples scoring one model takes: the evaluation reader's, a generator evaluator's yields, or None for
    an evaluator that returns one score (it reads its own data)."""
    from .readers import samples_of

    if scorer.evaluator is not None:
        return scorer.sample_count
    return len(samples_of(evaluation))


def granular_ranking(search: Search, ranking: Any) -> None:
    """The ranking's group count for the keep_float parameters; with strategy granular, a ranking within the bound and
    its informed starting points fixed on the first sampler slots."""
    from .sensitivity_search import GRANULAR_MAX_GROUPS, granular_starts

    search.ranking_groups = len(ranking.groups)
    search.ranking_sizes = [len(group["nodes"]) for group in ranking.groups]
    if (search.settings.keep_float_search or {}).get("strategy") != "granular":
        return
    if len(ranking.groups) > GRANULAR_MAX_GROUPS:
        fail(f"keep_float.search strategy granular searches one yes/no a group, and the ranking has "
             f"{len(ranking.groups)} groups (at most {GRANULAR_MAX_GROUPS}); group nodes with keep_float.blocks, or "
             "use top_k or strategy partitioned")
    search.queue_starts(granular_starts(len(ranking.groups)))


def record_floor(search: Search, calib: Any, evaluated: int | None) -> None:
    """Once per study (a re-run or another worker reads it): the float pass over the calibration samples and the
    sample counts, recorded for the report's cost split (floor.py)."""
    from .floor import floor_record

    settings = search.settings
    with search.slots.lock():
        if contract.FLOOR_ATTR not in search.sampler_study.user_attrs:
            record = floor_record(settings.model_path, calib, evaluated, settings.device)
            search.sampler_study.set_user_attr(contract.FLOOR_ATTR, record)


def run_sensitivity(settings: Settings) -> Any:
    """`--sensitivity`: the readers and Quark's quantizer in; the ranking (sensitivity.json, its charts) out."""
    from . import sensitivity
    from .quantize import QuarkQuantizer, float_exclusions, quark_in_child
    from .quantizer_process import QuantizerProcess

    process = QuantizerProcess(quark_in_child, settings)
    process.start()
    try:
        calib, evaluation = prepared_readers(settings)
        exclusions = float_exclusions(settings.model_path, settings.keep_float)
        quantizer = QuarkQuantizer(settings.model_path, calib, exclusions, process)
        return sensitivity.ensure(settings, calib, evaluation, exclusions, quantizer.quantize)
    finally:
        process.close()


def float_objectives(search: Search, evaluation: Any) -> Any:
    """With the latency or size objective: the float model measured as every trial will be (recorded in the study);
    the latency meter out (None without the latency objective)."""
    from quark.onnx.operators.custom_ops import get_library_path

    from .latency import LatencyMeter

    settings = search.settings
    meter = None
    if "latency" in settings.objectives:
        evaluation.reset_iter()
        meter = LatencyMeter(list(evaluation), settings.device, get_library_path(settings.device.split(":")[0].upper()),
                             settings.model_path)
        try:  # once per study (a re-run or another worker reads it): every trial's ratio scales the same figure
            with search.slots.lock():
                record = search.sampler_study.user_attrs.get(contract.FLOAT_LATENCY_ATTR)
                if record is None:
                    record = meter.reference()
                    search.record_float_objectives(record, None)
            meter.reference_ms = record["median_ms"]
        except Exception as error:  # noqa: BLE001 - the float model must run, or no latency compares
            fail(f"measuring the float model's latency failed: {type(error).__name__}: {error}")
    if "size" in settings.objectives:
        search.record_float_objectives(None, model_size(settings.model_path))
    return meter


def interrupted(search: Search, role: Role) -> int:
    """Stopped by a signal: the best of the trials completed so far written (best_config.json, best_model.onnx; a
    re-run resumes and writes them again at the end); EXIT_INTERRUPTED out. A launcher's worker leaves it to the
    launcher."""
    if not role.spawned and search.trials("COMPLETE"):
        best = write_best(search)
        say(f"qas: best so far {best['value']:.6g} from {best['model']} (trial {best['trial_number']} of "
            f"{best['trials_complete'] + best['grid_complete']} complete), written to {contract.BEST_CONFIG_FILE}")
    return contract.EXIT_INTERRUPTED


def main(settings: Settings, role: Role) -> int:
    """Run (or resume) the search as `role` says (alone, launching workers, or as one worker); the exit code out."""
    os.chdir(settings.here)  # Quark appends quantized_info.csv to the working directory
    if role.export is not None:
        from .export import export

        return export(settings, role.export)
    if role.sensitivity_only:
        run_sensitivity(settings)
        return contract.EXIT_OK
    search = Search(settings, role.index, joining=role.worker)  # the studies and slots exist before any worker
    if search.budget_reached():  # a re-run of a finished search: no readers, no float score, no Quark
        stopped = search.stopped()
        if role.worker:
            pass
        elif stopped is not None:
            say(f"qas: the search already stopped ({stopped['reason']}: {stopped['detail']}); nothing to run")
        else:
            say(f"qas: the budget ({settings.n_trials} trials) is already reached; nothing to run "
                "(raise n_trials to go on)")
    elif role.workers > 1 and not role.worker:
        code = run_workers(Path(settings.script), role.workers, role.verbose)
        if code == contract.EXIT_INTERRUPTED:
            return interrupted(search, role)
        if code != contract.EXIT_OK and not search.budget_reached():
            warn("qas: the workers stopped before the budget was reached; re-run to resume")
            return code
    elif run_stages(search) == contract.EXIT_INTERRUPTED:
        return interrupted(search, role)
    if role.spawned:
        return contract.EXIT_OK  # the launcher writes the winner once every worker has ended
    best = write_best(search)
    if settings.plots:
        try:
            say(f"qas: wrote {', '.join(path.name for path in write_plots(search))}")
        except Exception as error:  # noqa: BLE001 - the winner's files are written: a plot is not worth the run
            warn(f"qas: the plots could not be drawn ({type(error).__name__}: {error}); `qas report` draws them")
    where = f"copied to {contract.BEST_MODEL_FILE}" if best["best_model"] else "not copied here"
    if best.get("stopped"):
        say(f"qas: stopped: {best['stopped']['reason']} ({best['stopped']['detail']})")
    if best.get("why"):
        say(f"qas: recommended trial {best['trial_number']}: {best['why']}")
    say(f"qas: best value {best['value']:.6g} from {best['model']} ({best['stage']} stage), {where}; "
        f"see {contract.BEST_CONFIG_FILE}")
    if "keep_float" in best:
        kept = best["keep_float"]
        say(f"qas: the winner keeps {len(kept['groups'])} group(s) of the sensitivity ranking in float "
            f"({choice_text(kept['choice'])}): {', '.join(kept['groups']) or 'none'}")
    return contract.EXIT_OK
