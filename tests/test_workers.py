"""Several workers on one study without amd-quark or a database server: slots claimed exactly once by real processes
on the journal file, a SIGKILLed worker's configuration queued again and counted once, per-worker seeds, the
split of the cores, and the launcher's one exit code."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.runtime import contract
from compiler.runtime.search import Search
from compiler.runtime.space import stage_configs
from compiler.runtime.workers import combined_exit, cpu_shares, share_env

from .conftest import FakeQuark, fake_settings, product_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)


class LoggedQuark(FakeQuark):
    """FakeQuark that appends every quantization (stage model name + config) to a shared log file, slowly enough
    that workers overlap."""

    def __init__(self, log: Path, delay: float = 0.05, hang_on: int | None = None) -> None:
        super().__init__()
        self.log, self.delay, self.hang_on = log, delay, hang_on

    def quantize(self, config: dict[str, Any], output: Path) -> None:
        if self.hang_on is not None and len(self.quantized) == self.hang_on:
            self.log.with_suffix(".hung").write_text(output.name)
            time.sleep(3600)  # killed here
        time.sleep(self.delay)
        super().quantize(config, output)
        with open(self.log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"model": output.name, "config": config}, sort_keys=True) + "\n")


def worker(folder: str, index: int, changes: dict[str, Any], hang_on: int | None = None) -> None:
    """One worker process: join the study in `folder` and run slots until the budget is reached."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    always_fail = changes.pop("__fail__", False)
    settings = fake_settings(Path(folder), **changes)
    search = Search(settings, worker_index=index, joining=True)
    fake = LoggedQuark(Path(folder) / "quantized.log", hang_on=hang_on)
    if always_fail:
        fake.fail_when = lambda config: True
    search.attach(fake.quantize, fake.score)
    search.run(stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                             product_configs))


def start(folder: Path, index: int, changes: dict[str, Any], hang_on: int | None = None) -> Any:
    process = multiprocessing.get_context("spawn").Process(target=worker, args=(str(folder), index, changes, hang_on))
    process.start()
    return process


def logged(folder: Path) -> list[dict[str, Any]]:
    path = folder / "quantized.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_three_worker_processes_complete_the_budget_exactly_and_quantize_nothing_twice(tmp_path: Path) -> None:
    changes = {"n_trials": 9}
    Search(fake_settings(tmp_path, **changes))  # the launcher: studies and slots exist before any worker
    processes = [start(tmp_path, index, changes) for index in range(3)]
    for p in processes:
        p.join(120)
        assert p.exitcode == 0
    search = Search(fake_settings(tmp_path, **changes))
    grid = [t for t in search.grid_study.get_trials() if t.state.name == "COMPLETE"]
    assert sorted(t.user_attrs[contract.ATTR_GRID_INDEX] for t in grid) == list(range(6))  # each config once
    sampled = [t for t in search.sampler_study.get_trials() if t.state.name == "COMPLETE"]
    assert len(sampled) == 9 and search.budget_reached()
    assert not search.trials("RUNNING") and not search.trials("WAITING") and not search.trials("FAIL")
    quantized = Counter(json.dumps(entry["config"], sort_keys=True) for entry in logged(tmp_path))
    assert quantized and max(quantized.values()) == 1  # no configuration was quantized twice, across workers
    assert len({t.user_attrs[contract.ATTR_WORKER].split("@")[0] for t in grid + sampled}) >= 2  # they shared it
    # every sampler trial runs under the pinned grid winner
    winner = next(t for t in grid if t.number == search.sampler_study.user_attrs[contract.GRID_WINNER_ATTR])
    assert winner.value == min(t.value for t in grid)
    assert {t.user_attrs[contract.ATTR_CONFIG]["activation"] for t in sampled} == {
        winner.user_attrs[contract.ATTR_CONFIG]["activation"]}


def test_a_sigkilled_worker_s_trial_is_queued_again_with_its_configuration_and_counted_once(tmp_path: Path) -> None:
    changes = {"n_trials": 4, "two_stage": False, "grid_configs": 0}
    Search(fake_settings(tmp_path, **changes))
    victim = start(tmp_path, 0, changes, hang_on=1)  # its second trial never ends
    deadline = time.monotonic() + 60
    while not (tmp_path / "quantized.hung").exists():
        assert time.monotonic() < deadline and victim.is_alive()
        time.sleep(0.1)
    os.kill(victim.pid, signal.SIGKILL)
    victim.join()
    search = Search(fake_settings(tmp_path, **changes))  # the next worker's start finds the dead one's trial
    killed = [t for t in search.sampler_study.get_trials() if t.state.name == "FAIL"]
    assert len(killed) == 1 and killed[0].user_attrs[contract.ATTR_INTERRUPTED] and search.failures() == 0
    assert "ended without finishing it" in killed[0].user_attrs[contract.ATTR_ERROR]
    retry = [t for t in search.sampler_study.get_trials() if t.user_attrs.get(contract.ATTR_RETRIED_FROM) is not None]
    assert len(retry) == 1 and retry[0].state.name == "WAITING"
    assert retry[0].user_attrs[contract.ATTR_RETRIED_FROM] == killed[0].number
    survivor = start(tmp_path, 1, changes)
    survivor.join(120)
    assert survivor.exitcode == 0
    done = [t for t in search.sampler_study.get_trials() if t.state.name == "COMPLETE"]
    assert len(done) == 4 and search.budget_reached()
    rerun = next(t for t in done if t.user_attrs.get(contract.ATTR_RETRIED_FROM) == killed[0].number)
    assert rerun.params == killed[0].params  # the same configuration, run by the other worker


def test_each_worker_draws_with_its_own_deterministic_seed(tmp_path: Path) -> None:
    def first_draw(folder: Path, index: int) -> dict[str, Any]:
        folder.mkdir()
        s = fake_settings(folder, two_stage=False, grid_configs=0, sampler="Random")
        search = Search(s, worker_index=index)
        _study, trial, _stage = search.slots.claim(search.worker)
        return trial.suggest_int("x", 0, 10**9)

    draws = [first_draw(tmp_path / name, index) for name, index in (("a", 0), ("b", 0), ("c", 1), ("d", 2))]
    assert draws[0] == draws[1] and len({draws[0], draws[2], draws[3]}) == 3


def test_tpe_lies_about_running_trials_so_workers_spread_out(tmp_path: Path) -> None:
    search = Search(fake_settings(tmp_path, two_stage=False, grid_configs=0))
    assert search.sampler_study.sampler._constant_liar


def test_the_cores_are_split_between_workers_and_shared_only_when_there_are_more_workers() -> None:
    assert cpu_shares(2, [0, 1]) == [[0], [1]]
    assert cpu_shares(2, [0, 1, 2, 3, 4]) == [[0, 1, 2], [3, 4]]
    assert cpu_shares(3, [0, 1]) == [[0], [1], [0]]
    assert share_env([2, 3]) == {"QAS_CPUS": "2,3", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
                                 "OPENBLAS_NUM_THREADS": "2"}


@pytest.mark.parametrize(("codes", "stopped", "expected"), [
    ((0, 0), False, contract.EXIT_OK),
    ((0, 130), False, contract.EXIT_INTERRUPTED),
    ((0, -9), False, contract.EXIT_FAILED),
    ((1, 0), True, contract.EXIT_INTERRUPTED),
])
def test_the_launcher_s_exit_code_says_the_worst_of_its_workers(codes: tuple[int, ...], stopped: bool, expected: int,
                                                                capsys: Any) -> None:
    children = [subprocess.Popen([sys.executable, "-c", (f"import os; os.kill(os.getpid(), 9) if {c} == -9 else "
                                                                f"exit({c})")]) for c in codes]
    for child in children:
        child.wait()
    assert combined_exit(children, stopped) == expected
    if -9 in codes:
        assert "worker 1 ended with killed by SIGKILL" in capsys.readouterr().err


def test_max_failures_counts_across_workers_and_keep_models_keeps_the_best_with_workers(tmp_path: Path) -> None:
    changes = {"n_trials": 6, "keep_models": "best"}
    Search(fake_settings(tmp_path, **changes))
    processes = [start(tmp_path, index, changes) for index in range(2)]
    for p in processes:
        p.join(120)
        assert p.exitcode == 0
    search = Search(fake_settings(tmp_path, **changes))
    models = sorted(p.name for p in tmp_path.glob("quantized_model_*.onnx"))
    assert models == [search.ranked()[0].user_attrs[contract.ATTR_MODEL]]  # pruned by both, never the winner

    failing = tmp_path / "failing"
    failing.mkdir()
    changes = {"n_trials": 6, "two_stage": False, "grid_configs": 0, "max_failures": 3}
    Search(fake_settings(failing, **changes))
    processes = [start(failing, index, changes | {"__fail__": True}) for index in range(2)]
    for p in processes:
        p.join(120)
        assert p.exitcode == 0
    search = Search(fake_settings(failing, **changes))
    # counted across both workers: the search stops at 3, give or take the one the other worker had in hand
    assert 3 <= search.failures() <= 4 and not search.trials("COMPLETE") and not search.trials("RUNNING")


def test_with_an_artifact_folder_the_winner_is_fetched_from_it_when_this_folder_lacks_it(tmp_path: Path) -> None:
    from compiler.runtime.results import write_best

    shared = tmp_path / "shared"
    s = fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=3,
                      storage={"kind": "journal", "artifacts": str(shared)})
    search = Search(s)
    fake = FakeQuark()
    search.attach(fake.quantize, fake.score)
    assert search.run([]) is None
    best = search.ranked()[0]
    assert all(t.user_attrs.get(contract.ATTR_ARTIFACT) for t in search.trials("COMPLETE")
               if contract.ATTR_REUSED_FROM not in t.user_attrs)
    made_here = (tmp_path / best.user_attrs[contract.ATTR_MODEL]).read_bytes()
    for model in tmp_path.glob("quantized_model_*.onnx"):  # as if the trials ran on other machines
        model.unlink()
    summary = write_best(search)
    assert summary["best_model"] == contract.BEST_MODEL_FILE
    assert (tmp_path / contract.BEST_MODEL_FILE).read_bytes() == made_here


def test_without_an_artifact_folder_a_winner_made_elsewhere_is_named_not_copied(tmp_path: Path, capsys: Any) -> None:
    from compiler.runtime.results import write_best

    s = fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=2)
    search = Search(s)
    fake = FakeQuark()
    search.attach(fake.quantize, fake.score)
    search.run([])
    (tmp_path / contract.BEST_MODEL_FILE).write_text("an older winner")
    for model in tmp_path.glob("quantized_model_*.onnx"):
        model.unlink()
    summary = write_best(search)
    assert summary["best_model"] is None and not (tmp_path / contract.BEST_MODEL_FILE).exists()
    assert "copy it from there (set storage.artifacts" in capsys.readouterr().err


def test_waiting_on_a_configuration_a_dead_worker_held_does_not_hang(tmp_path: Path) -> None:
    import socket
    import threading

    search = Search(fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=2))
    dead = f"0@{socket.gethostname()}:999999999"  # a pid no live worker holds a lock for
    study, trial, _ = search.slots.claim(dead)
    config = {"activation": "Int8Spec", "cle_algo": None}
    trial.set_user_attr(contract.ATTR_CONFIG, config)
    found: list[Any] = []
    waiter = threading.Thread(target=lambda: found.append(search.scored(config)), daemon=True)
    waiter.start()
    waiter.join(30)
    assert not waiter.is_alive() and found == [None]  # the dead worker's trial was failed; nothing to wait for
    assert study.trials[trial.number].state.name == "FAIL"


def test_a_budget_lowered_on_resume_is_honoured_though_more_slots_were_queued(tmp_path: Path) -> None:
    first = Search(fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=6))
    fake = FakeQuark(interrupt_at=2)
    first.attach(fake.quantize, fake.score)
    assert first.run([]) == contract.EXIT_INTERRUPTED  # 2 complete, 5 slots still queued
    lowered = Search(fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=3))
    fake = FakeQuark()
    lowered.attach(fake.quantize, fake.score)
    assert lowered.run([]) is None and lowered.budget_reached()
    assert len(lowered.complete(lowered.sampler_study)) == 3 and len(fake.quantized) <= 1


def test_of_two_workers_claiming_the_last_needed_slot_exactly_one_runs_it(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, two_stage=False, grid_configs=0, n_trials=3)
    a, b = Search(s), Search(s, worker_index=1, joining=True)
    fake = FakeQuark()
    a.attach(fake.quantize, fake.score)
    for _ in range(2):
        _study, trial, _stage = a.slots.claim(a.worker)
        a.run_slot(a.sampler_study, trial, contract.STAGE_SAMPLER, [])
    a.sampler_study.enqueue_trial({}, user_attrs={contract.ATTR_SLOT: contract.STAGE_SAMPLER})  # one slot too many
    _, first, _ = a.slots.claim(a.worker)
    second = b.sampler_study.get_trials(states=(optuna.trial.TrialState.WAITING,))[0]  # b claims the extra one too
    b.storage.set_trial_state_values(second._trial_id, state=optuna.trial.TrialState.RUNNING)
    decided = [a.slots.surplus(first), b.slots.surplus(second)]
    assert decided == [True, False]  # the first to decide sees the other in hand and gives its own up
    given_up = a.sampler_study.trials[first.number]
    assert given_up.state.name == "FAIL" and given_up.user_attrs[contract.ATTR_INTERRUPTED]
    assert "not needed" in given_up.user_attrs[contract.ATTR_ERROR] and a.failures() == 0


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--worker", "--worker-index", "10000000"], {}, "--worker-index must be 0 to 255 (at most 256 workers)"),
    (["--worker", "--worker-index", "-1"], {}, "--worker-index must be 0 to 255 (at most 256 workers)"),
    (["--worker"], {"JOB_COMPLETION_INDEX": "10000000"},
     "the worker index in $JOB_COMPLETION_INDEX must be 0 to 255 (at most 256 workers)"),
    (["--workers", "1000"], {}, "--workers must be 1 to 256 (search.workers' bound)"),
    (["--workers", "0"], {}, "--workers must be 1 to 256 (search.workers' bound)"),
])
def test_the_script_refuses_worker_counts_and_indices_the_spec_refuses(tmp_path: Path, argv: list[str],
                                                                      env: dict[str, str], message: str,
                                                                      monkeypatch: Any, capsys: Any) -> None:
    from compiler.runtime.launch import parse_args

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as refused:
        parse_args(argv, fake_settings(tmp_path))
    assert refused.value.code == contract.EXIT_USAGE and message in capsys.readouterr().err
    for name in env:
        monkeypatch.delenv(name)
    top = parse_args(["--worker", "--worker-index", "255"], fake_settings(tmp_path))
    assert top.index == 255 and parse_args(["--workers", "256"], fake_settings(tmp_path)).workers == 256


def test_the_script_s_worker_bounds_are_the_spec_s() -> None:
    from .conftest import REPO

    schema = json.loads((REPO / "schemas" / "spec.schema.json").read_text(encoding="utf-8"))
    found = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            if key == "workers" and node.get("type") == "integer":
                found.append((node["minimum"], node["maximum"]))
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)

    walk(schema)
    assert len(found) >= 3 and set(found) == {(1, contract.MAX_WORKERS)}  # search.workers, kubernetes, slurm


def test_a_worker_that_loses_a_slot_never_leaves_its_name_on_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers claim at once. B has read the waiting slots and is held just before it names one until A has
    claimed (or 3 s passed); every RUNNING trial must then name the worker that claimed it. Before claims took the
    slot lock, B wrote its name over A's on the slot A had won, and A's trial looked like B's."""
    import threading

    search = Search(fake_settings(tmp_path))  # the grid stage's slots are queued
    storage = search.slots.storage
    b_read, a_done = threading.Event(), threading.Event()
    original = storage.set_trial_user_attr

    def named(trial_id: int, key: str, value: Any) -> None:
        if key == contract.ATTR_WORKER and value == "B" and not b_read.is_set():
            b_read.set()
            a_done.wait(3)  # with the slot lock A cannot claim meanwhile, so this runs out
        original(trial_id, key, value)

    monkeypatch.setattr(storage, "set_trial_user_attr", named)
    claims: dict[str, Any] = {}

    def claim(name: str, done: threading.Event | None = None) -> None:
        claims[name] = search.slots.claim(name)
        if done is not None:
            done.set()

    b = threading.Thread(target=claim, args=("B",))
    b.start()
    assert b_read.wait(30)
    a = threading.Thread(target=claim, args=("A", a_done))
    a.start()
    a.join(30)
    b.join(30)
    assert set(claims) == {"A", "B"} and all(claims.values())
    for name, (_study, trial, _stage) in claims.items():
        assert storage.get_trial(trial._trial_id).user_attrs[contract.ATTR_WORKER] == name
    assert claims["A"][1].number != claims["B"][1].number
