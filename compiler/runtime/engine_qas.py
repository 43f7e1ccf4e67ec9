"""Engine qas: settings in; a search over Quark's quantizer driven by qas's own Optuna loop, best_config.json and best_model.onnx out.

Two studies in one storage (storage.py): the grid stage's (every configuration once, by index) and the
sampler's (up to n_trials complete in total, across re-runs and workers). Each worker claims queued
slots (slots.py) until the budget is reached, so any number of workers, on one machine or many, share
one exact budget. A configuration already scored is answered from the study, a trial that raises is a
FAIL and the search goes on until max_failures (counted across workers), Ctrl-C marks the trial in
hand interrupted, queues it again and exits EXIT_INTERRUPTED. The quantizer and the scorer are passed
in, so the loop runs in tests without amd-quark.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from . import contract
from .artifacts import fetch_artifact, remove_artifact, store_artifact
from .checks import fail
from .console import say, warn
from .files import write_json
from .latency import model_size
from . import objectives
from .roles import Role
from .settings import Settings
from .slots import Slots
from .space import config_key, pinned_stage2_space, stage_configs, suggest_config
from .sensitivity import suggest_keep_float
from . import stopping
from .stopping import TrialTimer
from .storage import (STORAGE_RETRIES, Heartbeat, check_study_storage, describe, is_storage_error, open_storage_for,
                      wait_between_polls)
from .workers import run_workers

WORKER_SEED_STRIDE = 1000  # worker K's sampler seed is seed + 1000 K (+ the trials already run)
Quantize = Callable[[dict[str, Any], Path], None]  # (nested config, output path): writes the quantized model
Score = Callable[[Path], float]  # a quantized model's path in; its objective value out
Measure = Callable[[Path], dict[str, Any]]  # a model's path in; its latency record out (latency.LatencyMeter)


class Search:
    """One worker's view of the grid and sampler studies: slots claimed, trials run, failures counted, models pruned."""

    def __init__(self, settings: Settings, worker_index: int = 0, joining: bool = False) -> None:
        """Open (or create, once) the studies and queue the budget's slots. `joining`: another process started
        the search (a worker of `--workers N`, or `--worker` on another machine), so an existing study is the
        point, not a mistake to refuse."""
        import optuna

        from .lock import hold_worker_lock, worker_name

        self.optuna = optuna
        self.settings = settings
        self.worker = worker_name(worker_index)
        self.worker_index = worker_index
        self.quantize: Quantize | None = None  # set by attach(), once there is a trial to run
        self.score: Score | None = None
        self.float_nodes: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # keep_float.search: choice -> nodes
        self.measure: Measure | None = None  # with the latency objective
        self._orphaned = False  # a storage error may have left this worker's trial RUNNING
        check_study_storage(settings)
        hold_worker_lock()  # before any claim: a RUNNING trial of a live worker is never taken for a dead one's
        storage = self.storage = open_storage_for(settings)
        names = set(optuna.get_all_study_names(storage))
        if names & {settings.study_name, settings.grid_study_name} and not settings.resume and not joining:
            fail(f"study {settings.study_name!r} already exists in {describe(settings)}; set output.resume: true "
                 "or move it away")
        # one objective: direction= as ever; several (search.objectives): a multi-objective study
        directions = {"directions": settings.directions} if settings.multi_objective else {"direction": settings.direction}
        self.sampler_study = optuna.create_study(study_name=settings.study_name, storage=storage,
                                                 load_if_exists=True, **directions)
        self.grid_study = optuna.create_study(study_name=settings.grid_study_name, storage=storage,
                                              load_if_exists=True, **directions)
        ran = [t for t in self.sampler_study.get_trials(deepcopy=False) if t.state.name != "WAITING"]
        self.sampler_study.sampler = self._sampler(len(ran))  # queued slots are not draws
        self.slots = Slots(settings, storage, self.grid_study, self.sampler_study)
        self.top_up()

    def top_up(self) -> None:
        """Queue the budget's missing slots (and queue again the trials of workers that died), saying so."""
        dead = self.slots.top_up(self.failures())
        if dead:
            say(f"qas: {dead} trial(s) left RUNNING by a worker that is gone were marked interrupted "
                "and queued again")

    def _sampler(self, done: int) -> Any:
        # Seeded (F9), differently per worker and deterministically: the seed moves on by the worker's index and
        # by the trials already run (the same seed again would redraw the first run's start-up configurations).
        # TPE lies about the trials other workers are running, so they are not all drawn alike.
        name = contract.SAMPLER_CLASSES.get(self.settings.sampler, "TPESampler")
        seed = self.settings.seed + WORKER_SEED_STRIDE * self.worker_index + done
        options = {"constant_liar": True} if name == "TPESampler" else {}
        return getattr(self.optuna.samplers, name)(seed=seed, **options)

    def record_float_score(self, score: float) -> None:
        """Keep the float model's score under the user evaluator (as it returned it) in the sampler study, so the
        report can show each quantized model's score beside the difference the search minimized."""
        self.sampler_study.set_user_attr(contract.FLOAT_SCORE_ATTR, score)

    def record_float_objectives(self, latency: dict[str, Any] | None, size: int | None) -> None:
        """Keep the float model's latency record and size beside its score, measured as every trial's are."""
        if latency is not None:
            self.sampler_study.set_user_attr(contract.FLOAT_LATENCY_ATTR, latency)
        if size is not None:
            self.sampler_study.set_user_attr(contract.FLOAT_SIZE_ATTR, size)

    def attach(self, quantize: Quantize, score: Score, measure: Measure | None = None,
               float_nodes: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        """Give the search its quantizer and scorer (the float model is scored already), its latency meter, and with
        keep_float.search what a choice keeps in float (recorded on each trial)."""
        self.quantize, self.score, self.measure, self.float_nodes = quantize, score, measure, float_nodes

    def limit(self) -> float | None:
        """The worst accuracy value within evaluation.tolerance (None: no tolerance)."""
        if self.settings.tolerance is None:
            return None
        return objectives.bound(self.settings, self.sampler_study.user_attrs.get(contract.FLOAT_SCORE_ATTR))

    def stopped(self) -> dict[str, Any] | None:
        """The stop record a stop rule wrote (by any worker), or None."""
        if not self.settings.stop:
            return None
        return self.sampler_study.user_attrs.get(contract.STOPPED_ATTR)

    def check_stop(self) -> bool:
        """search.stop: True once a stop rule has fired (here or in another worker). Under the slot lock, starts the
        timeout's clock at the first claim and writes the stop record once; trials in flight are never stopped."""
        stop = self.settings.stop
        if not stop:
            return False
        if self.stopped() is not None:
            return True
        with self.slots.lock():
            attrs = self.sampler_study.user_attrs
            if contract.STOPPED_ATTR in attrs:
                return True
            now = time.time()
            started = attrs.get(contract.STARTED_ATTR)
            if started is None:
                self.sampler_study.set_user_attr(contract.STARTED_ATTR, now)
                started = now
            record = None
            if stop.get("timeout") and now - started >= stop["timeout"]:
                record = {"reason": "timeout",
                          "detail": f"{now - started:.0f} s since the first trial, timeout {stop['timeout']:g} s"}
            elif stop.get("at_tolerance"):
                done = sorted(self.trials("COMPLETE"), key=lambda t: (t.datetime_complete, t.number))
                detail = objectives.tolerance_stop(self.settings, done, self.limit(),
                                                   attrs.get(contract.FLOAT_SCORE_ATTR))
                record = {"reason": "tolerance", "detail": detail} if detail else None
            if record is None:
                return False
            record["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
            self.sampler_study.set_user_attr(contract.STOPPED_ATTR, record)
        say(f"qas: stopped: {record['reason']} ({record['detail']}); trials in flight finish, no new one starts")
        return True

    def complete(self, study: Any) -> list[Any]:
        return [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]

    def grid_settled(self) -> set[int]:
        """Grid indices that are done: complete, or failed by their configuration (run again, they fail again)."""
        return {t.user_attrs.get(contract.ATTR_GRID_INDEX) for t in self.grid_study.get_trials(deepcopy=False)
                if t.state.name == "COMPLETE" or (t.state.name == "FAIL"
                                                  and not t.user_attrs.get(contract.ATTR_INTERRUPTED))}

    def budget_reached(self) -> bool:
        """Every grid configuration is done and every sampler trial of the budget complete (or a stop rule fired)."""
        if self.stopped() is not None:
            return True
        grid_total, sampler_total = self.settings.stage_totals()
        return len(self.grid_settled()) >= grid_total and len(self.complete(self.sampler_study)) >= sampler_total

    def trials(self, state: str | None = None) -> list[Any]:
        found = self.grid_study.get_trials(deepcopy=False) + self.sampler_study.get_trials(deepcopy=False)
        return [t for t in found if state is None or t.state.name == state]

    def failures(self) -> int:
        return sum(1 for t in self.trials("FAIL") if not t.user_attrs.get(contract.ATTR_INTERRUPTED))

    def ranked(self, trials: list[Any] | None = None, top: int | None = None) -> list[Any]:
        """Complete trials (of both studies, or those given), best first by the study's direction (by the winner rule
        when objectives or a tolerance are declared)."""
        done = self.trials("COMPLETE") if trials is None else trials
        if self.settings.winner_rule:
            return objectives.ranking(self.settings, done, self.limit(), top=top)
        return sorted(done, key=lambda t: t.value, reverse=self.settings.direction == "maximize")

    def run_trial(self, study: Any, trial: Any, config: dict[str, Any], stage: str) -> None:
        """Quantize and score one configuration as `trial`; a failure is the trial's, Ctrl-C is the search's."""
        model = self.settings.path(f"quantized_model_{stage}_{trial.number}.onnx")
        trial.set_user_attr(contract.ATTR_STAGE, stage)
        trial.set_user_attr(contract.ATTR_CONFIG, config)
        trial.set_user_attr(contract.ATTR_MODEL, model.name)
        if "keep_float" in config and self.float_nodes is not None:
            trial.set_user_attr(contract.ATTR_KEEP_FLOAT, self.float_nodes(config["keep_float"]))
        try:
            with TrialTimer(self.settings.trial_timeout), Heartbeat(self.storage, trial._trial_id):
                self.quantize(config, model)
                value = self.score(model)
                if not math.isfinite(value):
                    raise ValueError(f"the score is {value}")
                values = self.objective_values(trial, model, value)
                store_artifact(self.settings, trial, model)
        except KeyboardInterrupt:
            with self.slots.lock():  # the configuration is queued again: a re-run (or another worker) finishes it
                trial.set_user_attr(contract.ATTR_INTERRUPTED, True)
                study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
                if stage == contract.STAGE_SAMPLER:
                    self.slots.requeue_sampler(trial)
            model.unlink(missing_ok=True)
            raise
        except Exception as error:  # noqa: BLE001 - any failure of one trial is that trial's (F10)
            if is_storage_error(error):
                raise
            trial.set_user_attr(contract.ATTR_ERROR, f"{type(error).__name__}: {error}")
            study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            model.unlink(missing_ok=True)
            warn(f"qas: {stage} trial {trial.number} failed ({type(error).__name__}: {error}); "
                 f"{self.failures()} of {self.settings.max_failures} failures allowed")
            self.top_up()  # a failed sampler trial's slot is queued again (while failures are allowed)
            return
        study.tell(trial, values if self.settings.multi_objective else value)
        self.prune_models()
        if not self.settings.winner_rule:
            say(f"qas: {stage} trial {trial.number}: {value:.6g} (best {self.ranked()[0].value:.6g})")
            return
        best = self.ranked(top=1)[0]
        say(f"qas: {stage} trial {trial.number}: {self.shown(values)} (recommended: trial {best.number}, "
            f"{self.shown(best.values)})")

    def objective_values(self, trial: Any, model: Path, accuracy: float) -> list[float]:
        """A scored model's values in search.objectives order; its latency record, size and tolerance recorded."""
        out = []
        for name in self.settings.objectives:
            if name == "accuracy":
                out.append(accuracy)
            elif name == "latency":
                record = self.measure(model)
                trial.set_user_attr(contract.ATTR_LATENCY, record)
                out.append(record["median_ms"])
            else:
                size = model_size(model)
                trial.set_user_attr(contract.ATTR_SIZE, size)
                out.append(float(size))
        within = objectives.is_within(self.settings, accuracy, self.limit())
        if within is not None:
            trial.set_user_attr(contract.ATTR_WITHIN_TOLERANCE, within)
        return out

    def shown(self, values: list[float]) -> str:
        units = {"accuracy": "", "latency": " ms", "size": " B"}
        return ", ".join(f"{name} {v:.6g}{units[name]}" for name, v in zip(self.settings.objectives, values, strict=True))

    def prune_models(self) -> None:
        """Delete the models keep_models does not keep: never the current best, nor a model a kept trial reuses.

        Safe beside other workers: only complete trials are ranked (a model being scored is not), and a new
        trial only pushes others down the ranking, so a model deleted here is never needed again."""
        keep_models = self.settings.keep_models
        if keep_models == "all":
            return
        keep = 1 if keep_models == "best" else int(keep_models.split("-", 1)[1])
        ranked = self.ranked()
        kept = {t.user_attrs[contract.ATTR_MODEL] for t in ranked[:keep]}
        for t in ranked[keep:]:
            if t.user_attrs[contract.ATTR_MODEL] not in kept:
                self.settings.path(t.user_attrs[contract.ATTR_MODEL]).unlink(missing_ok=True)
                if contract.ATTR_REUSED_FROM not in t.user_attrs:
                    remove_artifact(self.settings, t)

    def failures_exhausted(self) -> bool:
        return self.failures() >= self.settings.max_failures

    def stage2_space(self) -> dict[str, Any] | None:
        """The sampler stage's space: fine-tuning keys plus the pinned grid winner's settings (None before a pin)."""
        winner_number = self.sampler_study.user_attrs.get(contract.GRID_WINNER_ATTR)
        if winner_number is None:
            return None
        winner = next(t for t in self.complete(self.grid_study) if t.number == winner_number)
        return pinned_stage2_space(self.settings.search_space, winner.user_attrs[contract.ATTR_CONFIG])

    def run_slot(self, study: Any, trial: Any, stage: str, grid_configs: list[dict[str, Any]]) -> None:
        """One claimed slot: a grid configuration by its index, or a sampler draw (answered from the study when that
        configuration is already scored, here or by another worker)."""
        if stage == contract.STAGE_GRID:
            index = trial.user_attrs[contract.ATTR_GRID_INDEX]
            self.run_trial(study, trial, grid_configs[index], stage)
            return
        space = self.stage2_space() if self.settings.two_stage else self.settings.search_space
        if space is None:  # cannot happen: sampler slots are queued only once the winner is pinned
            fail("a sampler slot was queued before the grid stage's winner was pinned")
        config = suggest_config(trial, space)
        if self.settings.keep_float_search:  # one more parameter: how much of the sensitivity ranking stays float
            config["keep_float"] = suggest_keep_float(trial, self.settings.keep_float_search)
        previous = self.scored(config)
        if previous is None:
            self.run_trial(study, trial, config, stage)
            return
        source = previous.user_attrs.get(contract.ATTR_REUSED_FROM, previous.number)  # the trial really quantized
        for key in (contract.ATTR_STAGE, contract.ATTR_CONFIG, contract.ATTR_MODEL, contract.ATTR_KEEP_FLOAT,
                    contract.ATTR_LATENCY, contract.ATTR_SIZE, contract.ATTR_WITHIN_TOLERANCE):
            if key in previous.user_attrs:
                trial.set_user_attr(key, previous.user_attrs[key])
        trial.set_user_attr(contract.ATTR_REUSED_FROM, source)
        study.tell(trial, previous.values if self.settings.multi_objective else previous.value)
        say(f"qas: sampler trial {trial.number} repeats trial {source}: answered from the study")

    def scored(self, config: dict[str, Any]) -> Any:
        """The complete sampler trial with this configuration, waiting for another worker running it; else None."""
        key = config_key(config)
        while True:
            trials = [t for t in self.sampler_study.get_trials(deepcopy=False)
                      if t.user_attrs.get(contract.ATTR_CONFIG) is not None and config_key(t.user_attrs[contract.ATTR_CONFIG]) == key]
            done = [t for t in trials if t.state.name == "COMPLETE"]
            if done:
                return done[0]
            if not any(t.state.name == "RUNNING" and t.user_attrs.get(contract.ATTR_WORKER) != self.worker
                       for t in trials):
                return None
            wait_between_polls()  # another worker is quantizing it: its result will be this one's
            self.top_up()  # unless that worker died: then its trial is failed and this one quantizes it

    def run(self, grid_configs: list[dict[str, Any]]) -> int | None:
        """Claim and run slots until the budget is reached (by every worker); EXIT_INTERRUPTED after Ctrl-C, else None."""
        lost: list[BaseException] = []  # storage errors in a row
        try:
            while True:
                if stopping.requested():
                    raise KeyboardInterrupt
                try:
                    if self.step(grid_configs) == "done":
                        break
                    lost.clear()
                except Exception as error:  # noqa: BLE001 - only the storage's are retried; the rest re-raised
                    if not is_storage_error(error):
                        raise
                    lost.append(error)
                    self._orphaned = True
                    self.storage_lost(lost)
        except KeyboardInterrupt:
            self.slots.release_owned(self.worker, "stopped by a signal between trials")  # claimed, not yet begun
            done = len(self.trials("COMPLETE"))
            warn(f"qas: interrupted after {done} completed trials; re-run to resume")
            return contract.EXIT_INTERRUPTED
        if self.failures_exhausted():
            warn(f"qas: stopping: {self.failures()} trials failed (max_failures {self.settings.max_failures}); "
                 "see the trials' `error` attributes")
        return None

    def step(self, grid_configs: list[dict[str, Any]]) -> str | None:
        """Claim one slot and run it, or wait for other workers' trials; "done" when this worker's work is over."""
        if self.failures_exhausted() or self.check_stop():
            return "done"
        if self._orphaned:  # the storage failed mid-trial: that trial, still RUNNING under this worker, goes back
            self.slots.release_owned(self.worker, "the study storage failed while it ran")
            self._orphaned = False
        claimed = self.slots.claim(self.worker) or self._claim_after_top_up()
        if claimed == "done":
            return "done"
        if claimed is None:
            wait_between_polls()  # other workers hold the last slots: theirs may fail and be queued again
            return None
        study, trial, stage = claimed
        self.run_slot(study, trial, stage, grid_configs)
        return None

    def storage_lost(self, errors: list[BaseException]) -> None:
        """The storage did not answer: wait and try again, a few times, then stop (EXIT_FAILED) saying so."""
        import time

        error = errors[-1]
        what = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if len(errors) > len(STORAGE_RETRIES):
            warn(f"qas: error: lost the study storage ({describe(self.settings)}) after {len(errors)} tries: {what}; "
                 "the trials it holds are safe: start this worker again once the storage is back")
            raise SystemExit(contract.EXIT_FAILED)
        delay = STORAGE_RETRIES[len(errors) - 1]
        warn(f"qas: the study storage did not answer ({what}); trying again in {delay:g} s "
             f"({len(errors)} of {len(STORAGE_RETRIES)})")
        time.sleep(delay)

    def _claim_after_top_up(self) -> Any:
        """No slot waited: queue what is missing and claim again; "done" when nothing is left to run."""
        if self.budget_reached():
            return "done"
        self.top_up()
        claimed = self.slots.claim(self.worker)
        if claimed is not None:
            return claimed
        if self.budget_reached() or self.failures_exhausted():
            return "done"
        if self.trials("RUNNING") or self.trials("WAITING"):
            return None
        if not self.complete(self.grid_study) and self.settings.two_stage:
            fail("no grid-stage trial completed, so the sampler stage has no settings to start from")
        return "done"


def write_best(search: Search) -> dict[str, Any]:
    """The best complete trial in the studies in; best_model.onnx and best_config.json written, and the summary out.

    The winner's model may have been written by a worker on another machine: it is then fetched from the
    artifact folder, or (without one) best_config.json says where it is and best_model.onnx is not written."""
    settings = search.settings
    ranked = search.ranked(top=2) if settings.winner_rule else search.ranked()
    if not ranked:
        fail(f"no trial completed; {search.failures()} failed (see the trials' `error` attributes)")
    best = ranked[0]
    stage = best.user_attrs[contract.ATTR_STAGE]
    source = best if contract.ATTR_REUSED_FROM not in best.user_attrs else next(
        (t for t in ranked if t.number == best.user_attrs[contract.ATTR_REUSED_FROM]
         and t.user_attrs[contract.ATTR_STAGE] == stage), best)
    temp = settings.best_model_path.with_name(settings.best_model_path.name + ".tmp")
    local = settings.path(best.user_attrs[contract.ATTR_MODEL])
    if local.is_file():
        shutil.copyfile(local, temp)
        copied = True
    else:
        copied = fetch_artifact(settings, source, temp)
    if copied:
        os.replace(temp, settings.best_model_path)
    else:
        settings.best_model_path.unlink(missing_ok=True)  # never leave an older winner under the winner's name
        warn(f"qas: the best model, {best.user_attrs[contract.ATTR_MODEL]}, was written by worker "
             f"{best.user_attrs.get(contract.ATTR_WORKER, '(unknown)')} in its own output folder; copy it from "
             f"there (set storage.artifacts to a shared folder to have it here)")
    summary = {
        "stage": stage,
        "config": best.user_attrs[contract.ATTR_CONFIG],
        "value": best.values[0] if settings.multi_objective else best.value,  # the accuracy objective
        "trial_number": best.number,
        "study": settings.grid_study_name if stage == contract.STAGE_GRID else settings.study_name,
        "model": best.user_attrs[contract.ATTR_MODEL],
        "best_model": contract.BEST_MODEL_FILE if copied else None,
        "worker": best.user_attrs.get(contract.ATTR_WORKER),
        "trials_complete": len(search.complete(search.sampler_study)),
        "grid_complete": len(search.complete(search.grid_study)),
        "trials_failed": search.failures(),
        "metric": settings.metric,
        "direction": settings.direction,
        "spec_hash": settings.spec_hash,
        "space_hash": settings.space_hash,
    }
    if contract.ATTR_KEEP_FLOAT in best.user_attrs:  # beyond the fixed keep_float: the groups and exact nodes
        summary["keep_float"] = best.user_attrs[contract.ATTR_KEEP_FLOAT]
    if settings.evaluator is not None:
        summary["objective"] = "float-model score minus quantized-model score, oriented by higher_is_better; minimized"
        summary[contract.FLOAT_SCORE_ATTR] = search.sampler_study.user_attrs.get(contract.FLOAT_SCORE_ATTR)
    if settings.winner_rule or settings.stop:
        summary.update(winner_summary(search, ranked))
    write_json(settings.best_config_path, summary)
    return summary


def winner_summary(search: Search, ranked: list[Any]) -> dict[str, Any]:
    """best_config.json's keys for the winner rule: objectives, values, why the winner won, the runner-up, the float
    model's figures, the stop record; pareto.json (several objectives) written beside it."""
    settings = search.settings
    attrs = search.sampler_study.user_attrs
    limit = search.limit()
    out: dict[str, Any] = {"objectives": list(settings.objectives), "stopped": attrs.get(contract.STOPPED_ATTR)}
    if not settings.winner_rule:
        return out
    choice = objectives.choose(settings, search.trials("COMPLETE"), limit)
    out["values"] = objectives.values(settings, ranked[0])
    out["why"] = choice.reason
    out["rule"] = ("among trials within tolerance, the fastest (latencies within "
                   f"{contract.LATENCY_NOISE:.0%} tie, broken by accuracy then size); if none is, the most accurate")
    out["tolerance"] = None if settings.tolerance is None else {
        **settings.tolerance, "bound": limit, "met": choice.within}
    out["runner_up"] = objectives.trial_record(settings, ranked[1], limit) if len(ranked) > 1 else None
    out["float"] = {"score": attrs.get(contract.FLOAT_SCORE_ATTR), "latency": attrs.get(contract.FLOAT_LATENCY_ATTR),
                    "size_bytes": attrs.get(contract.FLOAT_SIZE_ATTR)}
    for key in (contract.ATTR_LATENCY, contract.ATTR_SIZE):
        if key in ranked[0].user_attrs:
            out[key] = ranked[0].user_attrs[key]
    if settings.multi_objective:
        front = objectives.pareto_front(settings, search.trials("COMPLETE"))
        write_json(settings.path(contract.PARETO_FILE), {
            "objectives": list(settings.objectives), "directions": settings.directions,
            "winner": ranked[0].number, "front": [objectives.trial_record(settings, t, limit) for t in front]})
        out["pareto"] = contract.PARETO_FILE
    return out


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

    from . import sensitivity
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
    quantizer = QuarkQuantizer(settings.model_path, calib, exclusions)
    if settings.keep_float_search:  # the ranking first: each trial keeps a prefix of it in float
        quantizer.ranking = sensitivity.ensure(settings, calib, evaluation, exclusions, quantizer.quantize)
    meter = float_objectives(search, evaluation)
    search.attach(quantizer, scorer.score, meter, quantizer.ranking.float_nodes if quantizer.ranking else None)
    configs = stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                            generate_all_configs)
    return search.run(configs)


def run_sensitivity(settings: Settings) -> Any:
    """`--sensitivity`: the readers and Quark's quantizer in; the ranking (sensitivity.json, its charts) out."""
    from . import sensitivity
    from .quantize import QuarkQuantizer, float_exclusions

    calib, evaluation = prepared_readers(settings)
    exclusions = float_exclusions(settings.model_path, settings.keep_float)
    quantizer = QuarkQuantizer(settings.model_path, calib, exclusions)
    return sensitivity.ensure(settings, calib, evaluation, exclusions, quantizer.quantize)


def float_objectives(search: Search, evaluation: Any) -> Any:
    """With the latency or size objective: the float model measured as every trial will be (recorded in the study);
    the latency meter out (None without the latency objective)."""
    from quark.onnx.operators.custom_ops import get_library_path

    from .latency import LatencyMeter

    settings = search.settings
    meter = None
    if "latency" in settings.objectives:
        evaluation.reset_iter()
        meter = LatencyMeter(list(evaluation), settings.device, get_library_path(settings.device.split(":")[0].upper()))
        try:
            search.record_float_objectives(meter(settings.model_path), None)
        except Exception as error:  # noqa: BLE001 - the float model must run, or no latency compares
            fail(f"measuring the float model's latency failed: {type(error).__name__}: {error}")
    if "size" in settings.objectives:
        search.record_float_objectives(None, model_size(settings.model_path))
    return meter


def main(settings: Settings, role: Role) -> int:
    """Run (or resume) the search as `role` says (alone, launching workers, or as one worker); the exit code out."""
    os.chdir(settings.here)  # Quark appends quantized_info.csv to the working directory
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
            return code
        if code != contract.EXIT_OK and not search.budget_reached():
            warn("qas: the workers stopped before the budget was reached; re-run to resume")
            return code
    elif run_stages(search) == contract.EXIT_INTERRUPTED:
        return contract.EXIT_INTERRUPTED
    if role.spawned:
        return contract.EXIT_OK  # the launcher writes the winner once every worker has ended
    best = write_best(search)
    if settings.plots:
        say(f"qas: wrote {write_plots(search).name}")
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
            f"({kept['choice']}): {', '.join(kept['groups']) or 'none'}")
    return contract.EXIT_OK
