"""The budget as slots in the study: settings and the two studies in; trials claimed exactly once across workers out.

Every trial of the budget is first a WAITING trial queued in its study (a slot): each grid configuration
once (by index), and sampler slots up to n_trials complete. A worker claims a slot by moving it from
WAITING to RUNNING in the storage, which succeeds for one worker only (Optuna's own trial queue works
the same way), so no slot runs twice and the budget is exact however many workers start or stop.
Slots are queued only under the slot lock (a file lock on one machine, a PostgreSQL advisory lock
across machines), so two workers never both queue the one that is missing. A dead worker's trial is
failed as interrupted (not a failure) and its configuration queued again, counted once in the budget.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from typing import Any

from . import contract
from .lock import FileLock, worker_is_dead
from .storage import advisory_lock


class Slots:
    """Queueing, claiming and re-queueing the budget's trials for one worker."""

    def __init__(self, settings: Any, storage: Any, grid_study: Any, sampler_study: Any) -> None:
        import optuna

        self.optuna = optuna
        self.settings = settings
        self.storage = storage
        self.grid_study = grid_study
        self.sampler_study = sampler_study
        self._engine: Any = None  # the advisory lock's SQLAlchemy engine (URL storage), made on first use

    # --- The slot lock ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the slot lock: one worker at a time claims, queues, re-queues or pins."""
        if self.settings.storage_kind != "url":
            study_path = self.settings.path(self.settings.study_db)
            with FileLock(study_path.with_name(study_path.name + ".slots")):
                yield
            return
        from sqlalchemy import create_engine

        if self._engine is None:  # its own connections: Optuna's pool serves the storage's calls under the lock
            self._engine = create_engine(self.storage.url, pool_pre_ping=True)
        with advisory_lock(self._engine, zlib.crc32(f"qas-slots:{self.settings.study_name}".encode())):
            yield

    # --- Claiming -----------------------------------------------------------------------------------
    def claim(self, worker: str) -> tuple[Any, Any, str] | None:
        """(study, trial, stage) of a slot this worker now owns (grid slots first), or None when none waits.

        Claimed under the slot lock, one worker at a time: without it a worker that lost the race for a slot could
        write its name over the winner's after the winner's last write, and a killed winner's trial then looked
        like a live worker's (seen under load: the trial was taken back only by the heartbeat grace period, and on
        a journal not at all)."""
        with self.lock():
            for study, stage in ((self.grid_study, contract.STAGE_GRID),
                                 (self.sampler_study, contract.STAGE_SAMPLER)):
                if study is self.sampler_study and self._sampler_in_hand(None) >= self.settings.stage_totals()[1]:
                    continue  # the budget is complete or in hand (it may have been lowered since slots were queued)
                for waiting in study.get_trials(deepcopy=False, states=(self.optuna.trial.TrialState.WAITING,)):
                    # Named before the claim, so no RUNNING trial is ever without a worker.
                    self.storage.set_trial_user_attr(waiting._trial_id, contract.ATTR_WORKER, worker)
                    try:  # WAITING -> RUNNING
                        if not self.storage.set_trial_state_values(waiting._trial_id,
                                                                   state=self.optuna.trial.TrialState.RUNNING):
                            continue
                    except self.optuna.exceptions.UpdateFinishedTrialError:
                        continue
                    # What Study.ask does after popping a queued trial: drop the study's per-ask trial cache, so
                    # the sampler sees the trials other workers finished meanwhile.
                    study._thread_local.cached_all_trials = None
                    return study, self.optuna.Trial(study, waiting._trial_id), stage
        return None

    def sampler_done(self) -> int:
        """Sampler trials of the budget that are done: complete, or pruned (contract.BUDGET_STATES)."""
        return sum(1 for t in self.sampler_study.get_trials(deepcopy=False) if t.state.name in contract.BUDGET_STATES)

    def _sampler_in_hand(self, mine: Any) -> int:
        """Sampler trials done (complete or pruned) or running, `mine` (a trial) left out."""
        return sum(1 for t in self.sampler_study.get_trials(deepcopy=False)
                   if t.state.name in contract.BUDGET_STATES
                   or (t.state.name == "RUNNING" and t.number != getattr(mine, "number", None)))

    def surplus(self, trial: Any) -> bool:
        """A sampler slot just claimed that the budget no longer needs (the others complete or in hand): failed as
        interrupted, not queued again; True then. Decided under the lock, so two workers never both give one up."""
        with self.lock():
            total = self.settings.stage_totals()[1]
            if self._sampler_in_hand(trial) < total:
                return False
            self._retire(self.sampler_study, trial, f"not needed: the {total} sampler trials of the budget are "
                                                    "complete or in hand", requeue=False)
            return True

    def give_up(self, study: Any, trial: Any, reason: str) -> None:
        """A slot just claimed that no step needs (a strategy's answer is proven): failed as interrupted with the
        reason, not queued again."""
        with self.lock():
            self._retire(study, trial, reason, requeue=False)

    # --- Queueing (under the lock) ------------------------------------------------------------------
    def top_up(self, failures: int) -> int:
        """Fail dead workers' trials (queued again), queue missing grid slots, pin the grid winner and queue
        sampler slots up to the budget; the number of dead workers' trials found out. Takes the slot lock."""
        with self.lock():
            dead = self._fail_dead_trials()
            grid_total, sampler_total = self.settings.stage_totals()
            grid = self.grid_study.get_trials(deepcopy=False)
            settled = self._queue_grid(grid, grid_total)
            if settled < grid_total or sampler_total == 0 or failures >= self.settings.max_failures:
                return dead
            if self.settings.two_stage and not self._pin_grid_winner(grid):
                return dead
            live = [t for t in self.sampler_study.get_trials(deepcopy=False)
                    if t.state.name in (*contract.BUDGET_STATES, "RUNNING", "WAITING")]
            for _ in range(sampler_total - len(live)):
                self.sampler_study.enqueue_trial({}, user_attrs={contract.ATTR_SLOT: contract.STAGE_SAMPLER})
            return dead

    def _queue_grid(self, grid: list[Any], total: int) -> int:
        """Queue every grid index with no live or settled trial; the number settled (complete, or failed by its
        configuration: run again it would fail again) out."""
        by_index: dict[int, list[Any]] = {}
        for t in grid:
            by_index.setdefault(t.user_attrs.get(contract.ATTR_GRID_INDEX), []).append(t)
        settled = 0
        for index in range(total):
            trials = by_index.get(index, [])
            states = {t.state.name for t in trials}
            if "COMPLETE" in states or any(t.state.name == "FAIL" and not t.user_attrs.get(contract.ATTR_INTERRUPTED)
                                           for t in trials):
                settled += 1
                continue
            if states & {"RUNNING", "WAITING"}:
                continue
            attrs: dict[str, Any] = {contract.ATTR_SLOT: contract.STAGE_GRID, contract.ATTR_GRID_INDEX: index}
            if trials:  # every earlier try was interrupted: this is the retry of the last one
                attrs[contract.ATTR_RETRIED_FROM] = max(t.number for t in trials)
            self.grid_study.enqueue_trial({}, user_attrs=attrs)
        return settled

    def _pin_grid_winner(self, grid: list[Any]) -> bool:
        """Record the grid stage's winner once, for every worker; False when no grid trial completed."""
        if self.sampler_study.user_attrs.get(contract.GRID_WINNER_ATTR) is not None:
            return True
        done = [t for t in grid if t.state.name == "COMPLETE"]
        if not done:
            return False
        # by accuracy (the first value: objectives come in contract.OBJECTIVES order, accuracy first)
        winner = sorted(done, key=lambda t: t.values[0], reverse=self.settings.direction == "maximize")[0]
        self.sampler_study.set_user_attr(contract.GRID_WINNER_ATTR, winner.number)
        return True

    def _fail_dead_trials(self) -> int:
        """Mark each RUNNING trial whose worker is gone FAIL and interrupted, and queue its configuration again."""
        count = 0
        for study in (self.grid_study, self.sampler_study):
            stale = set(self._silent_trial_ids(study))
            for t in study.get_trials(deepcopy=False, states=(self.optuna.trial.TrialState.RUNNING,)):
                worker = t.user_attrs.get(contract.ATTR_WORKER)  # None: not claimed by a qas worker at all
                if t._trial_id in stale:
                    reason = f"its worker {worker} stopped sending heartbeats (killed, or its machine stopped)"
                elif worker is None or worker_is_dead(worker):
                    reason = (f"its worker {worker or '(unknown)'} ended without finishing it (killed, or the machine "
                              "stopped)")
                else:
                    continue
                count += self._retire(study, t, reason)
        return count

    def _silent_trial_ids(self, study: Any) -> list[int]:
        """RUNNING trials whose heartbeat is older than the grace period (a storage with heartbeats), else none."""
        if not getattr(self.storage, "get_heartbeat_interval", lambda: None)():
            return []
        # What optuna.storages.fail_stale_trials reads; called directly, so the trial is marked (interrupted, why)
        # before it is failed: a finished trial's attributes can no longer be set.
        return self.storage._get_stale_trial_ids(study._study_id)

    def release_owned(self, worker: str, reason: str) -> None:
        """The RUNNING trials `worker` holds and will not finish (a stop between trials, a storage failure mid-trial),
        marked interrupted and queued again."""
        with self.lock():
            for study in (self.grid_study, self.sampler_study):
                for t in study.get_trials(deepcopy=False, states=(self.optuna.trial.TrialState.RUNNING,)):
                    if t.user_attrs.get(contract.ATTR_WORKER) == worker:
                        self._retire(study, t, reason)

    def _retire(self, study: Any, trial: Any, reason: str, requeue: bool = True) -> int:
        """A RUNNING trial no worker will finish: marked interrupted with the reason, then FAIL; a sampler trial's
        configuration is queued again at once (a grid index by _queue_grid). 1 when this call failed it, else 0."""
        try:
            self.storage.set_trial_user_attr(trial._trial_id, contract.ATTR_INTERRUPTED, True)
            self.storage.set_trial_user_attr(trial._trial_id, contract.ATTR_ERROR, f"interrupted: {reason}")
            self.storage.set_trial_state_values(trial._trial_id, state=self.optuna.trial.TrialState.FAIL)
        except self.optuna.exceptions.UpdateFinishedTrialError:
            return 0  # it finished after all
        if study is self.sampler_study and requeue:
            self.requeue_sampler(trial)
        return 1

    def requeue_sampler(self, trial: Any) -> None:
        """Queue a sampler slot for an interrupted trial: the same parameters again (none if it had not drawn)."""
        self.sampler_study.enqueue_trial(dict(trial.params), user_attrs={
            contract.ATTR_SLOT: contract.STAGE_SAMPLER, contract.ATTR_RETRIED_FROM: trial.number})
