"""Engine qas's trial loop: settings in; one worker's Search over the grid and sampler studies (slots claimed, trials
run and scored, failures counted, models pruned, stop rules honoured) out.

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import contract, objectives, stopping
from .accuracy_control import STEP_ATTR, Step, next_step, scored_steps
from .artifacts import remove_artifact, store_artifact
from .checks import fail
from .console import say, warn
from .earlier import earlier_versions, set_aside_earlier_models
from .latency import model_size
from .pruning import SampleWatch, evaluation_order, hardest_first, make_pruner
from .sensitivity_search import suggest_keep_float
from .settings import Settings
from .slots import Slots
from .space import config_key, pinned_stage2_space, suggest_config
from .stopping import TrialTimer
from .storage import (
    STORAGE_RETRIES,
    Heartbeat,
    check_study_storage,
    describe,
    is_storage_error,
    mark_studies,
    open_storage_for,
    refuse_foreign_studies,
    wait_between_polls,
)
from .tracking import Tracker

WORKER_SEED_STRIDE = 1000  # worker K's sampler seed is seed + 1000 K (+ the trials already run)
Quantize = Callable[[dict[str, Any], Path], Any]  # (nested config, output path): writes the model; its steps out
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
        self.ranking_groups = 0  # keep_float.search: the sensitivity ranking's group count (strategy granular)
        self.ranking_sizes: list[int] = []  # each ranked group's node count (strategy accuracy_control)
        self.starts: list[dict[str, Any]] = []  # strategy granular: fixed params for the first sampler slots
        self._orphaned = False  # a storage error may have left this worker's trial RUNNING
        self.tracker = Tracker(settings)  # output.mlflow: each finished trial an MLflow run (a no-op without it)
        check_study_storage(settings)
        hold_worker_lock()  # before any claim: a RUNNING trial of a live worker is never taken for a dead one's
        storage = self.storage = open_storage_for(settings)
        names = set(optuna.get_all_study_names(storage))
        if names & {settings.study_name, settings.grid_study_name} and not settings.resume and not joining:
            fail(f"study {settings.study_name!r} already exists in {describe(settings)}; set output.resume: true "
                 "or move it away")
        refuse_foreign_studies(storage, [settings.study_name, settings.grid_study_name], names, describe(settings))
        if not joining:  # before any trial of this study writes a model under a name an earlier study used
            set_aside_earlier_models(storage, settings.here, {settings.study_name, settings.grid_study_name},
                                     earlier_versions(settings.study_name, names, settings.storage_kind))
        # one objective: direction= as ever; several (search.objectives): a multi-objective study
        directions = ({"directions": settings.directions} if settings.multi_objective
                      else {"direction": settings.direction})
        pruner = make_pruner(settings.prune, settings.sampler, settings.n_trials)
        self.sampler_study = optuna.create_study(study_name=settings.study_name, storage=storage,
                                                 load_if_exists=True, pruner=pruner, **directions)
        self.grid_study = optuna.create_study(study_name=settings.grid_study_name, storage=storage,
                                              load_if_exists=True, **directions)
        mark_studies({contract.STAGE_SAMPLER: self.sampler_study, contract.STAGE_GRID: self.grid_study})
        ran = [t for t in self.sampler_study.get_trials(deepcopy=False) if t.state.name != "WAITING"]
        self.sampler_study.sampler = self._sampler(len(ran))  # queued slots are not draws
        self.slots = Slots(settings, storage, self.grid_study, self.sampler_study)
        self.top_up()

    def top_up(self) -> None:
        """Queue the budget's missing slots (and queue again the trials of workers that died), saying so."""
        dead = self.slots.top_up(self.failures())
        if self.starts:  # a two-stage search queues its sampler slots only once the grid's winner is pinned
            self.queue_starts(self.starts)
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
        if not self.settings.stop and not self.settings.accuracy_control:
            return None
        return self.sampler_study.user_attrs.get(contract.STOPPED_ATTR)

    def check_stop(self) -> bool:
        """search.stop: True once a stop rule has fired (here or in another worker). Under the slot lock, starts the
        timeout's clock at the first claim and writes the stop record once; trials in flight are never stopped."""
        if self.stopped() is not None:
            return True
        stop = self.settings.stop
        if not stop:
            return False
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
        return len(self.grid_settled()) >= grid_total and self.slots.sampler_done() >= sampler_total

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
        watch = (SampleWatch(trial, evaluation_order(self.sampler_study), self.sampler_study.pruner.reference)
                 if self.settings.prune and stage == contract.STAGE_SAMPLER else None)
        steps: dict[str, Any] = {}
        started = time.perf_counter()
        try:
            with TrialTimer(self.settings.trial_timeout), Heartbeat(self.storage, trial._trial_id):
                steps.update(self.quantize(config, model) or {})
                started = time.perf_counter()
                value = self.score(model, watch) if watch is not None else self.score(model)
                steps.update(scoring_steps(time.perf_counter() - started, watch))
                if not math.isfinite(value):
                    raise ValueError(f"the score is {value}")
                started = time.perf_counter()
                values = self.objective_values(trial, model, value)
                steps["latency_s"] = round(time.perf_counter() - started, 4)
                trial.set_user_attr(contract.ATTR_STEPS, steps)
                store_artifact(self.settings, trial, model)
        except KeyboardInterrupt:
            self.interrupted(study, trial, stage, model)
            raise
        except self.optuna.TrialPruned as pruned:
            steps.update(scoring_steps(time.perf_counter() - started, watch))
            self.pruned(study, trial, stage, model, steps, watch, pruned)
            return
        except Exception as error:
            if is_storage_error(error):
                raise
            if stopping.requested():  # the stop signal, turned into another error by the library it landed in
                self.interrupted(study, trial, stage, model)
                raise KeyboardInterrupt from error
            self.failed(study, trial, stage, model, error)
            return
        if self.taken_back(trial, stage, model):
            return
        if watch is not None and evaluation_order(self.sampler_study) is None:
            self.record_evaluation_order(watch)
        study.tell(trial, values if self.settings.multi_objective else value)
        self.tracker.told(self.storage, trial, stage)
        self.prune_models()
        if not self.settings.winner_rule:
            say(f"qas: {stage} trial {trial.number}: {value:.6g} (best {self.ranked()[0].value:.6g})")
            return
        best = self.ranked(top=1)[0]
        say(f"qas: {stage} trial {trial.number}: {self.shown(values)} (recommended: trial {best.number}, "
            f"{self.shown(best.values)})")

    def failed(self, study: Any, trial: Any, stage: str, model: Path, error: Exception) -> None:
        """A trial whose quantization or scoring raised: told FAIL with the error, its model removed, its sampler slot
        queued again while failures are allowed."""
        if self.taken_back(trial, stage, model):  # e.g. its attributes could not be set: it is finished
            return
        trial.set_user_attr(contract.ATTR_ERROR, f"{type(error).__name__}: {error}{getattr(error, 'details', '')}")
        study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        self.tracker.told(self.storage, trial, stage)
        model.unlink(missing_ok=True)
        warn(f"qas: {stage} trial {trial.number} failed ({type(error).__name__}: {error}); "
             f"{self.failures()} of {self.settings.max_failures} failures allowed")
        self.top_up()

    def pruned(self, study: Any, trial: Any, stage: str, model: Path, steps: dict[str, Any], watch: Any,
               why: BaseException) -> None:
        """A trial search.prune stopped: PRUNED with its steps and the samples it was scored on, its model removed;
        it counts toward the budget, as Optuna's n_trials counts pruned trials."""
        if self.taken_back(trial, stage, model):
            return
        trial.set_user_attr(contract.ATTR_STEPS, steps)
        trial.set_user_attr(contract.ATTR_SAMPLES_SEEN, watch.seen)
        study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
        self.tracker.told(self.storage, trial, stage)
        model.unlink(missing_ok=True)
        say(f"qas: {stage} trial {trial.number}: pruned, {why}")

    def queue_starts(self, starts: list[dict[str, Any]]) -> None:
        """Fix the Optuna parameters of the first queued sampler slots to these starting points (strategy granular),
        once per study (as soon as sampler slots are queued): they are claimed in order, so the first sampler trials
        try them first."""
        self.starts = starts
        with self.slots.lock():
            if self.sampler_study.user_attrs.get(contract.STARTS_ATTR):
                return
            waiting = self.sampler_study.get_trials(deepcopy=False, states=(self.optuna.trial.TrialState.WAITING,))
            if not waiting:
                return
            for slot, params in zip(sorted(waiting, key=lambda t: t.number), starts, strict=False):
                self.storage.set_trial_system_attr(slot._trial_id, "fixed_params", params)
            self.sampler_study.set_user_attr(contract.STARTS_ATTR, True)

    def record_evaluation_order(self, watch: Any) -> None:
        """The first sampler trial scored whole sets the study's hardest-first order (once, for every worker)."""
        with self.slots.lock():
            if evaluation_order(self.sampler_study) is None:
                self.sampler_study.set_user_attr(contract.EVALUATION_ORDER_ATTR,
                                                 hardest_first(watch.values, self.settings.direction))

    def interrupted(self, study: Any, trial: Any, stage: str, model: Path) -> None:
        """A trial stopped by a signal: FAIL and interrupted (not a failure), its configuration queued again so a
        re-run (or another worker) finishes it, its model removed."""
        if self.taken_back(trial, stage, model, quiet=True):
            return
        with self.slots.lock():
            trial.set_user_attr(contract.ATTR_INTERRUPTED, True)
            study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            if stage == contract.STAGE_SAMPLER:
                self.slots.requeue_sampler(trial)
        model.unlink(missing_ok=True)

    def taken_back(self, trial: Any, stage: str, model: Path, quiet: bool = False) -> bool:
        """True when another worker has already failed this worker's trial and queued it again (this process was
        paused, SIGSTOP or a frozen machine, past the heartbeats' grace period): its late result is dropped with
        one line and its model removed; the search goes on."""
        if self.storage.get_trial(trial._trial_id).state.name == "RUNNING":
            return False
        model.unlink(missing_ok=True)
        if not quiet:
            say(f"qas: {stage} trial {trial.number} was taken back by another worker while this one was paused "
                "(no heartbeat within the grace period) and queued again; its late result is dropped")
        return True

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
            elif name == "quantized_fraction":
                record = self.quantized_share(model)
                trial.set_user_attr(contract.ATTR_QUANTIZED, record)
                out.append(record["fraction"])
            else:
                size = model_size(model)
                trial.set_user_attr(contract.ATTR_SIZE, size)
                out.append(float(size))
        within = objectives.is_within(self.settings, accuracy, self.limit())
        if within is not None:
            trial.set_user_attr(contract.ATTR_WITHIN_TOLERANCE, within)
        return out

    def quantized_share(self, model: Path) -> dict[str, Any]:
        """The quantized_fraction record of a trial's model (quantized_share.py)."""
        from .quantized_share import quantized_share

        return quantized_share(self.settings.model_path, model)

    def shown(self, values: list[float]) -> str:
        units = contract.OBJECTIVE_UNITS
        return ", ".join(f"{name} {v:.6g}{units[name]}"
                         for name, v in zip(self.settings.objectives, values, strict=True))

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
        if self.slots.surplus(trial):
            return
        space = self.stage2_space() if self.settings.two_stage else self.settings.search_space
        if space is None:  # cannot happen: sampler slots are queued only once the winner is pinned
            fail("a sampler slot was queued before the grid stage's winner was pinned")
        config = suggest_config(trial, space)
        if self.settings.accuracy_control:  # the next step of the strategy, from the steps scored so far
            if not self.accuracy_step(study, trial, config):
                return
        elif self.settings.keep_float_search:  # one more parameter: how much of the sensitivity ranking stays float
            config["keep_float"] = suggest_keep_float(trial, self.settings.keep_float_search, self.ranking_groups)
        previous = self.scored(config)
        if previous is None:
            self.run_trial(study, trial, config, stage)
            return
        source = previous.user_attrs.get(contract.ATTR_REUSED_FROM, previous.number)  # the trial really quantized
        for key in (contract.ATTR_STAGE, contract.ATTR_CONFIG, contract.ATTR_MODEL, contract.ATTR_KEEP_FLOAT,
                    contract.ATTR_LATENCY, contract.ATTR_SIZE, contract.ATTR_WITHIN_TOLERANCE, contract.ATTR_QUANTIZED):
            if key in previous.user_attrs:
                trial.set_user_attr(key, previous.user_attrs[key])
        trial.set_user_attr(contract.ATTR_REUSED_FROM, source)
        study.tell(trial, previous.values if self.settings.multi_objective else previous.value)
        self.tracker.told(self.storage, trial, stage)
        say(f"qas: sampler trial {trial.number} repeats trial {source}: answered from the study")

    def accuracy_step(self, study: Any, trial: Any, config: dict[str, Any]) -> bool:
        """strategy accuracy_control: this claimed slot's config given the next step's keep_float (accuracy_control.py)
        and True; or False once the answer is proven: then the stop record is written (once, for every worker) and
        the slot given up.

        The step is chosen and claimed under the slot lock: a worker that chooses the same step while another runs it
        finds that trial (scored() waits for its result) instead of quantizing the step a second time."""
        with self.slots.lock():
            found, tested = self.next_accuracy_step()
            if isinstance(found, Step):
                config["keep_float"] = {"groups": list(found.groups)}
                trial.set_user_attr(STEP_ATTR, {"phase": found.phase, "groups": list(found.groups)})
                if not self.taken(config, trial.number):  # the first to choose it runs it; the others wait
                    trial.set_user_attr(contract.ATTR_CONFIG, config)
                return True
        self.record_answer(found, len(tested))
        self.slots.give_up(study, trial, "not needed: accuracy_control's answer is proven")
        return False

    def next_accuracy_step(self) -> tuple[Any, dict[tuple[int, ...], bool]]:
        """strategy accuracy_control: (the next Step or the proven Answer, the steps scored so far) from the study."""
        tested = scored_steps(self.complete(self.sampler_study), contract.ATTR_WITHIN_TOLERANCE, contract.ATTR_CONFIG)
        return next_step(self.ranking_sizes, tested), tested

    def taken(self, config: dict[str, Any], number: int) -> bool:
        """A sampler trial other than `number` with this configuration is running or complete."""
        return any(t.number != number and t.state.name in ("RUNNING", "COMPLETE") for t in self.with_config(config))

    def with_config(self, config: dict[str, Any]) -> list[Any]:
        """The sampler trials recorded with this configuration (any state)."""
        key = config_key(config)
        return [t for t in self.sampler_study.get_trials(deepcopy=False)
                if t.user_attrs.get(contract.ATTR_CONFIG) is not None
                and config_key(t.user_attrs[contract.ATTR_CONFIG]) == key]

    def answer_proven(self) -> bool:
        """strategy accuracy_control, before a slot is claimed: True (the stop record written) once the steps scored
        so far prove the answer."""
        if not self.settings.accuracy_control or self.quantize is None:
            return False
        found, tested = self.next_accuracy_step()
        if isinstance(found, Step):
            return False
        self.record_answer(found, len(tested))
        return True

    def record_answer(self, found: Any, steps: int) -> None:
        """The proven answer as the study's stop record (once, for every worker): no new trial starts."""
        with self.slots.lock():
            if contract.STOPPED_ATTR not in self.sampler_study.user_attrs:
                self.sampler_study.set_user_attr(contract.STOPPED_ATTR, {
                    "reason": "accuracy_control", "detail": f"{found.detail} (proven in {steps} step(s))",
                    "answer": None if found.groups is None else list(found.groups),
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                say(f"qas: accuracy_control: {found.detail} (proven in {steps} step(s)); no new trial starts")

    def scored(self, config: dict[str, Any]) -> Any:
        """The complete sampler trial with this configuration, waiting for another worker running it; else None."""
        while True:
            trials = self.with_config(config)
            done = [t for t in trials if t.state.name == "COMPLETE"]
            if done:
                return done[0]
            if not any(t.state.name == "RUNNING" and t.user_attrs.get(contract.ATTR_WORKER) != self.worker
                       for t in trials):
                return None
            wait_between_polls()  # another worker is quantizing it: its result will be this one's
            self.top_up()  # unless that worker died: then its trial is failed and this one quantizes it

    def run(self, grid_configs: list[dict[str, Any]]) -> int | None:
        """Claim and run slots until the budget is reached (by every worker); EXIT_INTERRUPTED after Ctrl-C, else
        None."""
        lost: list[BaseException] = []  # storage errors in a row
        try:
            while True:
                if stopping.requested():
                    raise KeyboardInterrupt
                try:
                    if self.step(grid_configs) == "done":
                        break
                    lost.clear()
                except Exception as error:
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
        if self.failures_exhausted() or self.check_stop() or self.answer_proven():
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


def scoring_steps(elapsed: float, watch: Any) -> dict[str, float]:
    """Scoring's wall time and the pruning watch (None: no search.prune) in; evaluate_s (the inferences and metric)
    and, with pruning, prune_s (reporting each sample to the study and asking the pruner) out."""
    if watch is None:
        return {"evaluate_s": round(elapsed, 4)}
    return {"evaluate_s": round(max(elapsed - watch.seconds, 0.0), 4), "prune_s": round(watch.seconds, 4)}
