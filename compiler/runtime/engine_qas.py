"""Engine qas: settings in; a search over Quark's quantizer driven by qas's own Optuna loop, best_config.json and best_model.onnx out.

Two studies in one SQLite file: the grid stage's (every configuration once, by index) and the sampler's
(up to n_trials complete in total, across re-runs). A configuration already scored is answered from
the study, a trial that raises is a FAIL and the search goes on until max_failures, Ctrl-C marks the
trial in hand interrupted and exits EXIT_INTERRUPTED. The quantizer and the scorer are passed in, so
the loop runs in tests without amd-quark.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

from . import contract
from .checks import fail
from .console import say, warn
from .files import write_json
from .settings import Settings
from .space import config_key, pinned_stage2_space, stage_configs, suggest_config
from . import stopping
from .stopping import TrialTimer
from .study_file import check_study_file

Quantize = Callable[[dict[str, Any], Path], None]  # (nested config, output path): writes the quantized model
Score = Callable[[Path], float]  # a quantized model's path in; its objective value out


class Search:
    """The grid and sampler studies of one output folder, the trial loop, failure counting and model pruning."""

    def __init__(self, settings: Settings) -> None:
        import optuna

        self.optuna = optuna
        self.settings = settings
        self.quantize: Quantize | None = None  # set by attach(), once there is a trial to run
        self.score: Score | None = None
        db = settings.path(settings.study_db)
        check_study_file(db)
        storage = self.storage = optuna.storages.RDBStorage(settings.storage_url)
        names = {s.study_name for s in optuna.get_all_study_summaries(storage)} if db.exists() else set()
        if names & {settings.study_name, settings.grid_study_name} and not settings.resume:
            fail(f"study {settings.study_name!r} already exists in {db}; set output.resume: true or move it away")
        self.sampler_study = optuna.create_study(study_name=settings.study_name, storage=storage,
                                                 direction=settings.direction, load_if_exists=True,
                                                 sampler=self._sampler(len(self._trials_of(settings.study_name))))
        self.grid_study = optuna.create_study(study_name=settings.grid_study_name, storage=storage,
                                              direction=settings.direction, load_if_exists=True)
        stale = self.fail_running("its process ended without finishing it (killed, or the machine stopped)")
        if stale:
            say(f"qas: {stale} trial(s) left RUNNING by an earlier run were marked interrupted")

    def fail_running(self, reason: str) -> int:
        """Mark every RUNNING trial FAIL and interrupted (not a failure); the count out.

        Called only while this process holds the study lock (launch.py), so no live process owns them.
        """
        running = self.trials("RUNNING")
        for t in running:  # the storage API takes trial ids; FrozenTrial keeps its id in _trial_id
            self.storage.set_trial_user_attr(t._trial_id, contract.ATTR_INTERRUPTED, True)
            self.storage.set_trial_user_attr(t._trial_id, contract.ATTR_ERROR, f"interrupted: {reason}")
            self.storage.set_trial_state_values(t._trial_id, self.optuna.trial.TrialState.FAIL)
        return len(running)

    def _trials_of(self, name: str) -> list[Any]:
        try:
            return self.optuna.load_study(study_name=name, storage=self.storage).trials
        except KeyError:
            return []

    def _sampler(self, done: int) -> Any:
        # Seeded (F9). On resume the seed moves on by the trials already run: the same seed again would
        # redraw the first run's start-up configurations.
        name = contract.SAMPLER_CLASSES.get(self.settings.sampler, "TPESampler")
        return getattr(self.optuna.samplers, name)(seed=self.settings.seed + done)

    def record_float_score(self, score: float) -> None:
        """Keep the float model's score under the user evaluator (as it returned it) in the sampler study, so the
        report can show each quantized model's score beside the difference the search minimized."""
        self.sampler_study.set_user_attr(contract.FLOAT_SCORE_ATTR, score)

    def attach(self, quantize: Quantize, score: Score) -> None:
        """Give the search its quantizer and scorer (the float model is scored already)."""
        self.quantize, self.score = quantize, score

    def complete(self, study: Any) -> list[Any]:
        return [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]

    def budget_reached(self) -> bool:
        """Every grid configuration and sampler trial of the budget is complete."""
        grid_total, sampler_total = self.settings.stage_totals()
        grid_done = {t.user_attrs.get(contract.ATTR_GRID_INDEX) for t in self.complete(self.grid_study)}
        return len(grid_done) >= grid_total and len(self.complete(self.sampler_study)) >= sampler_total

    def trials(self, state: str | None = None) -> list[Any]:
        found = self.grid_study.get_trials(deepcopy=False) + self.sampler_study.get_trials(deepcopy=False)
        return [t for t in found if state is None or t.state.name == state]

    def failures(self) -> int:
        return sum(1 for t in self.trials("FAIL") if not t.user_attrs.get(contract.ATTR_INTERRUPTED))

    def ranked(self, trials: list[Any] | None = None) -> list[Any]:
        """Complete trials (of both studies, or those given), best first by the study's direction."""
        done = self.trials("COMPLETE") if trials is None else trials
        return sorted(done, key=lambda t: t.value, reverse=self.settings.direction == "maximize")

    def run_trial(self, study: Any, trial: Any, config: dict[str, Any], stage: str) -> None:
        """Quantize and score one configuration as `trial`; a failure is the trial's, Ctrl-C is the search's."""
        model = self.settings.path(f"quantized_model_{stage}_{trial.number}.onnx")
        trial.set_user_attr(contract.ATTR_STAGE, stage)
        trial.set_user_attr(contract.ATTR_CONFIG, config)
        trial.set_user_attr(contract.ATTR_MODEL, model.name)
        try:
            with TrialTimer(self.settings.trial_timeout):
                self.quantize(config, model)
                value = self.score(model)
        except KeyboardInterrupt:
            trial.set_user_attr(contract.ATTR_INTERRUPTED, True)
            study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            model.unlink(missing_ok=True)
            raise
        except Exception as error:  # noqa: BLE001 - any failure of one trial is that trial's (F10)
            trial.set_user_attr(contract.ATTR_ERROR, f"{type(error).__name__}: {error}")
            study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            model.unlink(missing_ok=True)
            warn(f"qas: {stage} trial {trial.number} failed ({type(error).__name__}: {error}); "
                 f"{self.failures()} of {self.settings.max_failures} failures allowed")
            return
        study.tell(trial, value)
        self.prune_models()
        say(f"qas: {stage} trial {trial.number}: {value:.6g} (best {self.ranked()[0].value:.6g})")

    def prune_models(self) -> None:
        """Delete the models keep_models does not keep; never the current best (nor a model a kept trial reuses)."""
        keep_models = self.settings.keep_models
        if keep_models == "all":
            return
        keep = 1 if keep_models == "best" else int(keep_models.split("-", 1)[1])
        ranked = self.ranked()
        kept = {t.user_attrs[contract.ATTR_MODEL] for t in ranked[:keep]}
        for t in ranked[keep:]:
            if t.user_attrs[contract.ATTR_MODEL] not in kept:
                self.settings.path(t.user_attrs[contract.ATTR_MODEL]).unlink(missing_ok=True)

    def too_many_failures(self) -> bool:
        if self.failures() >= self.settings.max_failures:
            warn(f"qas: stopping: {self.failures()} trials failed (max_failures {self.settings.max_failures}); "
                 "see the trials' `error` attributes")
            return True
        return False

    def grid_stage(self, configs: list[dict[str, Any]]) -> None:
        """Every grid configuration once; a completed one is never run again."""
        done = {t.user_attrs[contract.ATTR_GRID_INDEX] for t in self.complete(self.grid_study)}
        for index, config in enumerate(configs):
            if index in done:
                continue
            if stopping.requested():
                raise KeyboardInterrupt
            if self.too_many_failures():
                return
            trial = self.grid_study.ask()
            trial.set_user_attr(contract.ATTR_GRID_INDEX, index)
            self.run_trial(self.grid_study, trial, config, contract.STAGE_GRID)

    def stage2_space(self) -> dict[str, Any] | None:
        """The sampler stage's space: fine-tuning keys plus the grid winner's settings, pinned once sampling began."""
        grid_done = self.complete(self.grid_study)
        if not grid_done:
            return None
        winner_number = self.sampler_study.user_attrs.get(contract.GRID_WINNER_ATTR)
        if winner_number is None:
            winner = self.ranked(grid_done)[0]
            self.sampler_study.set_user_attr(contract.GRID_WINNER_ATTR, winner.number)
        else:
            winner = next(t for t in grid_done if t.number == winner_number)
        return pinned_stage2_space(self.settings.search_space, winner.user_attrs[contract.ATTR_CONFIG])

    def sampler_stage(self, space: dict[str, Any]) -> None:
        """Sampler trials up to n_trials complete in total; a configuration already scored is answered from the study."""
        while True:
            if stopping.requested():
                raise KeyboardInterrupt
            complete = self.complete(self.sampler_study)
            if len(complete) >= self.settings.n_trials or self.too_many_failures():
                return
            scored = {config_key(t.user_attrs[contract.ATTR_CONFIG]): t for t in complete}
            trial = self.sampler_study.ask()
            config = suggest_config(trial, space)
            previous = scored.get(config_key(config))
            if previous is None:
                self.run_trial(self.sampler_study, trial, config, contract.STAGE_SAMPLER)
                continue
            source = previous.user_attrs.get(contract.ATTR_REUSED_FROM, previous.number)  # the trial really quantized
            for key in (contract.ATTR_STAGE, contract.ATTR_CONFIG, contract.ATTR_MODEL):
                trial.set_user_attr(key, previous.user_attrs[key])
            trial.set_user_attr(contract.ATTR_REUSED_FROM, source)
            self.sampler_study.tell(trial, previous.value)
            say(f"qas: sampler trial {trial.number} repeats trial {source}: answered from the study")

    def run(self, grid_configs: list[dict[str, Any]]) -> int | None:
        """The grid stage, then the sampler stage when the budget has one; EXIT_INTERRUPTED after Ctrl-C, else None."""
        settings = self.settings
        try:
            self.grid_stage(grid_configs)
            if settings.stage_totals()[1] > 0 and self.failures() < settings.max_failures:
                space = self.stage2_space() if settings.two_stage else settings.search_space
                if space is None:
                    fail("no grid-stage trial completed, so the sampler stage has no settings to start from")
                self.sampler_stage(space)
        except KeyboardInterrupt:
            self.fail_running("stopped by a signal between trials")  # a trial asked but not yet begun
            done = len(self.trials("COMPLETE"))
            warn(f"qas: interrupted after {done} completed trials; re-run to resume")
            return contract.EXIT_INTERRUPTED
        return None


def write_best(search: Search) -> dict[str, Any]:
    """The best complete trial in the studies in; best_model.onnx and best_config.json written, and the summary out."""
    settings = search.settings
    ranked = search.ranked()
    if not ranked:
        fail(f"no trial completed; {search.failures()} failed (see the trials' `error` attributes)")
    best = ranked[0]
    stage = best.user_attrs[contract.ATTR_STAGE]
    temp = settings.best_model_path.with_name(settings.best_model_path.name + ".tmp")
    shutil.copyfile(settings.path(best.user_attrs[contract.ATTR_MODEL]), temp)
    os.replace(temp, settings.best_model_path)
    summary = {
        "stage": stage,
        "config": best.user_attrs[contract.ATTR_CONFIG],
        "value": best.value,
        "trial_number": best.number,
        "study": settings.grid_study_name if stage == contract.STAGE_GRID else settings.study_name,
        "model": best.user_attrs[contract.ATTR_MODEL],
        "best_model": contract.BEST_MODEL_FILE,
        "trials_complete": len(search.complete(search.sampler_study)),
        "grid_complete": len(search.complete(search.grid_study)),
        "trials_failed": search.failures(),
        "metric": settings.metric,
        "direction": settings.direction,
        "spec_hash": settings.spec_hash,
        "space_hash": settings.space_hash,
    }
    if settings.evaluator is not None:
        summary["objective"] = "float-model score minus quantized-model score, oriented by higher_is_better; minimized"
        summary[contract.FLOAT_SCORE_ATTR] = search.sampler_study.user_attrs.get(contract.FLOAT_SCORE_ATTR)
    write_json(settings.best_config_path, summary)
    return summary


def _objective_name(settings: Settings) -> str:
    """What a trial's value is, for a plot's axis."""
    if settings.evaluator is None:
        return settings.metric or "objective"
    return f"{settings.evaluator['function']} {'drop' if settings.evaluator['higher_is_better'] else 'rise'} " \
           "from the float model"


def write_plots(search: Search) -> Path:
    """Optuna's optimization history of the study that holds the searched trials, as HTML; its path out."""
    import optuna

    study = search.sampler_study if search.complete(search.sampler_study) else search.grid_study
    path = search.settings.path("optimization_history.html")
    figure = optuna.visualization.plot_optimization_history(study, target_name=_objective_name(search.settings))
    figure.write_html(str(path), include_plotlyjs="directory")  # plotly.min.js once beside it, not 4.8 MB inside
    return path


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
    """Readers, the float score, Quark's quantizer, then the stages; EXIT_INTERRUPTED after Ctrl-C, else None."""
    from quark.onnx.quantization.auto_search.config_generator import generate_all_configs

    from .quantize import QuarkQuantizer, float_exclusions
    from .scoring import Scorer, make_evaluator

    settings = search.settings
    calib, evaluation = prepared_readers(settings)
    scorer = Scorer(settings.metric, make_evaluator(settings.evaluator, settings.here), evaluation, settings.device)
    try:
        scorer.score_float(settings.model_path)
    except Exception as error:  # noqa: BLE001 - the float model must score, or no trial can
        fail(f"scoring the float model failed, so no trial could be scored: {type(error).__name__}: {error}")
    if settings.evaluator is not None:  # the baseline is oriented (F6): back to what the evaluator returned
        search.record_float_score(scorer.baseline if settings.evaluator["higher_is_better"] else -scorer.baseline)
    exclusions = float_exclusions(settings.model_path, settings.keep_float)
    search.attach(QuarkQuantizer(settings.model_path, calib, exclusions), scorer.score)
    configs = stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                            generate_all_configs)
    return search.run(configs)


def main(settings: Settings) -> int:
    """Run (or resume) the search; the process exit code out."""
    os.chdir(settings.here)  # Quark appends quantized_info.csv to the working directory
    search = Search(settings)
    if search.budget_reached():  # a re-run of a finished search: no readers, no float score, no Quark
        say(f"qas: the budget ({settings.n_trials} trials) is already reached; nothing to run "
            "(raise n_trials to go on)")
    elif run_stages(search) == contract.EXIT_INTERRUPTED:
        return contract.EXIT_INTERRUPTED
    best = write_best(search)
    if settings.plots:
        say(f"qas: wrote {write_plots(search).name}")
    say(f"qas: best value {best['value']:.6g} from {best['model']} ({best['stage']} stage), "
        f"copied to {contract.BEST_MODEL_FILE}; see {contract.BEST_CONFIG_FILE}")
    return contract.EXIT_OK
