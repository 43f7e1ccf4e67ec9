"""The search runtime without amd-quark: engine qas's trial loop, resume, reuse, failures, pruning and winner files
against a fake quantizer and scorer on a real Optuna study; the space helpers; and a linter run over the runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from compiler.runtime import contract
from compiler.runtime.results import write_best, write_plots
from compiler.runtime.search import Search
from compiler.runtime.settings import Settings
from compiler.runtime.space import (
    nested_from_flat,
    pinned_stage2_space,
    stage_configs,
    suggest_config,
)

from .conftest import REPO, SPACE, FakeQuark, product_configs
from .conftest import fake_settings as settings

optuna.logging.set_verbosity(optuna.logging.WARNING)

def run(s: Settings, fake: FakeQuark) -> tuple[Search, int | None]:
    search = Search(s)
    search.attach(fake.quantize, fake.score)
    code = search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs))
    return search, code


def complete(study: Any) -> list[Any]:
    return [t for t in study.get_trials() if t.state.name == "COMPLETE"]


def test_two_stage_runs_every_grid_config_once_then_samples_with_the_grid_winner_pinned(tmp_path: Path) -> None:
    fake = FakeQuark()
    search, code = run(settings(tmp_path), fake)
    assert code is None
    grid = complete(search.grid_study)
    assert sorted(t.user_attrs[contract.ATTR_GRID_INDEX] for t in grid) == list(range(6))
    winner = min(grid, key=lambda t: t.value)
    assert winner.user_attrs[contract.ATTR_CONFIG] == {"activation": "Int16Spec", "cle_algo": "cle",
                                                       "OptimizeModel": True}
    assert search.sampler_study.user_attrs[contract.GRID_WINNER_ATTR] == winner.number
    sampled = complete(search.sampler_study)
    assert len(sampled) == 4
    for t in sampled:
        config = t.user_attrs[contract.ATTR_CONFIG]
        assert (config["activation"], config["cle_algo"], config["OptimizeModel"]) == ("Int16Spec", "cle", True)
        assert config["algorithms"] in ("adaround", "adaquant") and t.user_attrs[contract.ATTR_STAGE] == "sampler"


def test_a_rerun_resumes_to_the_total_and_a_finished_search_quantizes_nothing(tmp_path: Path) -> None:
    first = FakeQuark()
    run(settings(tmp_path, n_trials=2), first)
    assert len(first.quantized) == 6 + 2
    second = FakeQuark()
    search, _ = run(settings(tmp_path, n_trials=5), second)
    assert len(complete(search.sampler_study)) == 5 and len(complete(search.grid_study)) == 6
    assert len(second.quantized) <= 3 and all(c["activation"] == "Int16Spec" for c in second.quantized)
    again = Search(settings(tmp_path, n_trials=5))
    assert again.budget_reached()
    third = FakeQuark()
    run(settings(tmp_path, n_trials=5), third)
    assert third.quantized == []


def test_a_repeated_configuration_is_answered_from_the_study_naming_the_trial_really_quantized(tmp_path: Path) -> None:
    space = {"activation": ["XInt8Spec", "Int8Spec"], "cle_algo": [None]}
    fake = FakeQuark()
    search, _ = run(settings(tmp_path, search_space=space, two_stage=False, n_trials=6, sampler="Random"), fake)
    trials = complete(search.sampler_study)
    assert len(trials) == 6 and len(fake.quantized) == len({json.dumps(c) for c in fake.quantized}) <= 2
    quantized = {t.number for t in trials if contract.ATTR_REUSED_FROM not in t.user_attrs}
    reused = [t for t in trials if contract.ATTR_REUSED_FROM in t.user_attrs]
    assert len(reused) == 6 - len(fake.quantized)
    for t in reused:
        assert t.user_attrs[contract.ATTR_REUSED_FROM] in quantized
        source = search.sampler_study.trials[t.user_attrs[contract.ATTR_REUSED_FROM]]
        assert t.value == source.value and t.user_attrs[contract.ATTR_CONFIG] == source.user_attrs[contract.ATTR_CONFIG]


def test_failures_are_recorded_and_counted_and_stop_the_search_at_max_failures(tmp_path: Path, capsys: Any) -> None:
    fake = FakeQuark(fail_when=lambda config: config["activation"] == "XInt8Spec")
    search, code = run(settings(tmp_path, n_trials=2), fake)
    failed = [t for t in search.grid_study.get_trials() if t.state.name == "FAIL"]
    assert code is None and len(failed) == 2 == search.failures()
    assert {t.user_attrs[contract.ATTR_ERROR] for t in failed} == {"RuntimeError: quantizer exploded"}
    assert not list(tmp_path.glob("quantized_model_grid_0.onnx"))  # a failed trial leaves no model
    assert len(complete(search.sampler_study)) == 2

    always = FakeQuark(fail_when=lambda config: True)
    (tmp_path / "x").mkdir()
    stopped, _ = run(settings(tmp_path / "x", max_failures=3), always)
    assert stopped.failures() == 3 and not stopped.trials("COMPLETE")
    assert "stopping: 3 trials failed (max_failures 3)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        write_best(stopped)
    assert stop.value.code == contract.EXIT_USAGE


def test_ctrl_c_marks_the_trial_interrupted_not_failed_and_a_rerun_resumes(tmp_path: Path) -> None:
    search, code = run(settings(tmp_path), FakeQuark(interrupt_at=2))
    assert code == contract.EXIT_INTERRUPTED
    interrupted = [t for t in search.grid_study.get_trials() if t.state.name == "FAIL"]
    assert [t.user_attrs.get(contract.ATTR_INTERRUPTED) for t in interrupted] == [True] and search.failures() == 0
    resumed = FakeQuark()
    search, code = run(settings(tmp_path), resumed)
    assert code is None and len(resumed.quantized) == 4 + 4  # the 4 grid configs left, then the sampler trials
    assert search.budget_reached()


@pytest.mark.parametrize(("keep", "left"), [("best", 1), ("top-3", 3), ("all", 10)])
def test_keep_models_prunes_all_but_the_best_and_never_the_winner(tmp_path: Path, keep: str, left: int) -> None:
    search, _ = run(settings(tmp_path, keep_models=keep), FakeQuark())
    models = sorted(p.name for p in tmp_path.glob("quantized_model_*.onnx"))
    assert len(models) == left
    best = search.ranked()[0]
    assert best.user_attrs[contract.ATTR_MODEL] in models


def test_best_config_and_best_model_name_the_best_trial_of_both_studies(tmp_path: Path) -> None:
    search, _ = run(settings(tmp_path), FakeQuark())
    summary = write_best(search)
    saved = json.loads((tmp_path / contract.BEST_CONFIG_FILE).read_text())
    best = min(search.trials("COMPLETE"), key=lambda t: t.value)
    assert saved == summary and saved["value"] == best.value and saved["trial_number"] == best.number
    assert saved["study"] == ("fake-grid" if saved["stage"] == "grid" else "fake")
    assert (saved["trials_complete"], saved["grid_complete"], saved["trials_failed"]) == (4, 6, 0)
    assert (tmp_path / contract.BEST_MODEL_FILE).read_bytes() == (tmp_path / saved["model"]).read_bytes()


def test_the_float_score_under_a_user_evaluator_is_kept_in_the_study_and_best_config(tmp_path: Path) -> None:
    evaluator = {"file": "evals.py", "function": "top1", "higher_is_better": True}
    search, _ = run(settings(tmp_path, metric=None, evaluator=evaluator), FakeQuark())
    search.record_float_score(0.95)
    assert write_best(search)[contract.FLOAT_SCORE_ATTR] == 0.95
    assert json.loads((tmp_path / contract.BEST_CONFIG_FILE).read_text())[contract.FLOAT_SCORE_ATTR] == 0.95
    reread = optuna.load_study(study_name="fake", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "fake_study.journal"))))
    assert reread.user_attrs[contract.FLOAT_SCORE_ATTR] == 0.95  # where `qas report` reads it
    (tmp_path / "plain").mkdir()
    plain, _ = run(settings(tmp_path / "plain"), FakeQuark())
    assert contract.FLOAT_SCORE_ATTR not in write_best(plain)  # a built-in metric: the float model is the reference


def test_maximize_ranks_the_highest_first(tmp_path: Path) -> None:
    search, _ = run(settings(tmp_path, direction="maximize", two_stage=False, sampler="Grid", n_trials=4,
                             search_space={"activation": SPACE["activation"], "cle_algo": ["cle", None]}), FakeQuark())
    values = [t.value for t in search.ranked()]
    assert values == sorted(values, reverse=True) and len(values) == 4
    assert write_best(search)["value"] == max(values)


def test_plots_are_written_for_the_study_that_holds_the_searched_trials(tmp_path: Path) -> None:
    search, _ = run(settings(tmp_path, plots=True), FakeQuark())
    [path] = write_plots(search)  # one objective: the one history
    assert path == tmp_path / "report" / "optimization_history.html" and "plotly" in path.read_text()[:5000].lower()
    assert (path.stat().st_size < 100_000
            and (tmp_path / "report" / "plotly.min.js").is_file())  # plotly.js once, beside it
    assert not (tmp_path / "plotly.min.js").exists()  # one copy an output folder: where `qas report` writes its own
    assert "L2" in path.read_text()  # the axis names what the values are


def test_a_second_study_is_refused_when_resume_is_off(tmp_path: Path, capsys: Any) -> None:
    run(settings(tmp_path, n_trials=1), FakeQuark())
    with pytest.raises(SystemExit):
        Search(settings(tmp_path, resume=False))
    assert "already exists" in capsys.readouterr().err


def test_suggest_config_follows_quark_order_and_conditions() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(8):
        trial = study.ask()
        config = suggest_config(trial, SPACE)
        algorithm = config["algorithms"]
        assert set(config) == {"activation", "activation_params", "cle_algo", "algorithms", f"{algorithm}_params",
                               "OptimizeModel"}
        assert f"{algorithm}_params_num_iterations" in trial.params
        assert nested_from_flat(SPACE, trial.params) == config
        study.tell(trial, 0.0)


def test_the_pinned_stage2_space_keeps_every_setting_of_the_winner() -> None:
    winner = {"activation": "Int8Spec", "activation_params": {"symmetric": True}, "cle_algo": None,
              "OptimizeModel": True}
    space = pinned_stage2_space(SPACE, winner)
    assert list(space) == ["algorithms", "adaround_params", "adaquant_params", "activation", "activation_params",
                           "cle_algo", "OptimizeModel"]
    assert space["cle_algo"] == [None] and space["OptimizeModel"] == [True]  # Quark's own drops these (F4)
    assert space["activation_params"] == {"symmetric": [True], "only_if": "activation"}


def test_the_runtime_and_every_golden_settings_script_pass_the_linter() -> None:
    targets = [str(REPO / "compiler" / "runtime"), *map(str, sorted((REPO / "golden").glob("*/expected/*.py")))]
    assert len(targets) > 10
    linted = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E9,B", *targets],
                            capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_whole_package_tests_and_benches_have_no_undefined_or_unused_names() -> None:
    targets = [str(REPO / name) for name in ("compiler", "tests", "bench")]
    linted = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E9", *targets],
                            capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_runtime_imports_only_the_standard_library_at_import_time() -> None:
    code = ("import sys, compiler.runtime.launch, compiler.runtime.engine_qas, compiler.runtime.engine_autosearchpro;"
            "print(sorted(m for m in ('optuna', 'quark', 'onnx', 'onnxruntime', 'numpy', 'torch')"
            " if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_study_lock_refuses_a_second_holder_naming_the_first_and_frees_on_close(tmp_path: Path,
                                                                                     capsys: Any) -> None:
    from compiler.runtime.lock import acquire

    study = tmp_path / "fake_study.db"
    held = acquire(study)
    with pytest.raises(SystemExit) as refused:
        acquire(study)
    assert refused.value.code == contract.EXIT_USAGE
    assert f"another search is running on fake_study.db: pid {__import__('os').getpid()} on " in capsys.readouterr().err
    held.close()
    acquire(study).close()  # free again once the holder is gone


def test_running_trials_left_by_a_dead_run_are_marked_interrupted_on_start(tmp_path: Path) -> None:
    search = Search(settings(tmp_path))
    search.sampler_study.ask()
    search.grid_study.ask()  # as a SIGKILLed run leaves them
    again = Search(settings(tmp_path))
    stale = again.trials("FAIL")
    assert len(stale) == 2 and not again.trials("RUNNING") and again.failures() == 0
    assert all(t.user_attrs[contract.ATTR_INTERRUPTED] for t in stale)


def test_a_trial_past_its_time_limit_fails_with_the_reason_and_the_search_goes_on(tmp_path: Path) -> None:
    import time

    class Slow(FakeQuark):
        def quantize(self, config: dict[str, Any], output: Path) -> None:
            if config["activation"] == "XInt8Spec":
                time.sleep(30)
            super().quantize(config, output)

    started = time.monotonic()
    search, code = run(settings(tmp_path, trial_timeout=0.5, n_trials=1), Slow())
    assert code is None and time.monotonic() - started < 25
    failed = search.trials("FAIL")
    assert len(failed) == 2 == search.failures()  # the two XInt8Spec grid configurations
    assert {t.user_attrs[contract.ATTR_ERROR] for t in failed} == {
        "TrialTimeout: the trial ran past search.trial_timeout (0.5 s) and was stopped"}
    assert len(complete(search.grid_study)) == 4 and len(complete(search.sampler_study)) == 1


@pytest.mark.parametrize("damage", ["emptied", "garbage", "cut off", "not optuna"])
def test_a_damaged_study_file_stops_the_search_naming_it_and_is_never_rewritten(tmp_path: Path, capsys: Any,
                                                                              damage: str) -> None:
    run(settings(tmp_path, n_trials=1), FakeQuark())
    journal = tmp_path / "fake_study.journal"
    data = journal.read_bytes()
    if damage == "emptied":
        journal.write_bytes(b"")
    elif damage == "garbage":
        journal.write_bytes(b"\x00garbage\n" * 100)
    elif damage == "cut off":  # a write that never finished
        journal.write_bytes(data[: len(data) - 7])
    else:
        journal.write_text('{"notes": 1}\n')
    before = journal.read_bytes()
    with pytest.raises(SystemExit) as stop:
        Search(settings(tmp_path, n_trials=1))
    assert stop.value.code == contract.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"the study file {journal} is " in err and "qas leaves it as it is" in err and "Traceback" not in err
    assert journal.read_bytes() == before


def test_a_damaged_sqlite_study_file_is_named_too(tmp_path: Path, capsys: Any) -> None:
    from compiler.runtime.study_file import check_study_file

    db = tmp_path / "x_study.db"
    db.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(SystemExit):
        check_study_file(db)
    assert "is not a SQLite database" in capsys.readouterr().err


def test_a_study_left_in_an_earlier_sqlite_file_is_not_silently_started_over(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "fake_study.db").write_bytes(b"")
    with pytest.raises(SystemExit):
        Search(settings(tmp_path))
    assert ("holds its study in fake_study.db" in capsys.readouterr().err
            and not (tmp_path / "fake_study.journal").exists())


def test_a_model_changed_since_compile_is_refused_with_the_fix(tmp_path: Path, capsys: Any) -> None:
    import hashlib

    from compiler.runtime.checks import check_model

    model, data = tmp_path / "m.onnx", tmp_path / "m.onnx_data"
    model.write_bytes(b"graph")
    data.write_bytes(b"weights")
    expected = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (model, data)}
    check_model(model, expected)  # unchanged: nothing to say
    data.write_bytes(b"other weights")
    with pytest.raises(SystemExit) as stop:
        check_model(model, expected)
    assert stop.value.code == contract.EXIT_USAGE
    err = capsys.readouterr().err
    assert "the model changed since compile (m.onnx_data in " in err and "recompile the spec" in err
    data.unlink()
    with pytest.raises(SystemExit):
        check_model(model, expected)


def test_a_stop_signal_whose_keyboardinterrupt_was_swallowed_still_stops_before_the_next_trial(tmp_path: Path) -> None:
    import signal as signals

    from compiler.runtime import stopping

    class SwallowedStop(FakeQuark):  # the signal arrives, but Python dropped its KeyboardInterrupt (a GC callback)
        def quantize(self, config: dict[str, Any], output: Path) -> None:
            super().quantize(config, output)
            if len(self.quantized) == 2:
                stopping._requested.append("SIGTERM")

    previous = {s: signals.getsignal(s) for s in stopping.STOP_SIGNALS}
    try:
        search, code = run(settings(tmp_path), SwallowedStop())
    finally:
        stopping._requested.clear()
        for s, handler in previous.items():
            signals.signal(s, handler)
    assert code == contract.EXIT_INTERRUPTED
    assert len(complete(search.grid_study)) == 2 and not complete(search.sampler_study)  # no third trial began


def test_the_lock_holder_is_named_while_held_and_none_once_free(tmp_path: Path) -> None:
    from compiler.runtime.lock import acquire, holder

    study = tmp_path / "fake_study.db"
    assert holder(study) is None
    held = acquire(study)
    assert holder(study).startswith(f"pid {__import__('os').getpid()} on ")
    held.close()
    assert holder(study) is None


def test_a_stop_signal_that_a_library_turned_into_another_error_still_counts_as_interrupted(tmp_path: Path) -> None:
    from compiler.runtime import stopping

    class Wrapping(FakeQuark):  # Ctrl-C lands inside a library that re-raises it as its own error
        def quantize(self, config: dict[str, Any], output: Path) -> None:
            if len(self.quantized) == 2:
                stopping._requested.append("SIGINT")
                raise RuntimeError("quantization aborted")
            super().quantize(config, output)

    try:
        search, code = run(settings(tmp_path), Wrapping())
    finally:
        stopping._requested.clear()
    assert code == contract.EXIT_INTERRUPTED and search.failures() == 0
    (stopped,) = search.trials("FAIL")
    assert stopped.user_attrs[contract.ATTR_INTERRUPTED] and contract.ATTR_ERROR not in stopped.user_attrs


def cheap_quantizer(marker: str) -> Any:
    """A QuantizerProcess factory (run in the child): quantizes by writing the config; the config can ask it to fail,
    to crash with SIGSEGV, or to hang as native code does (deaf to SIGINT and SIGTERM), writing its pid to `marker`."""
    import os
    import signal
    import time

    def quantize(config: dict[str, Any], output: Path, exclusions: list[Any]) -> None:
        if config.get("fail"):
            raise ValueError("no such activation")
        if config.get("crash"):
            os.kill(os.getpid(), signal.SIGSEGV)
        if config.get("hang"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            Path(marker).write_text(str(os.getpid()))
            while True:
                time.sleep(1)
        output.write_text(json.dumps({"config": config, "exclusions": exclusions, "cwd": os.getcwd()}))

    return quantize


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_quantizer_process_answers_errors_survives_crashes_and_is_killed_by_a_stop_or_a_timeout(
        tmp_path: Path) -> None:
    import signal
    import threading
    import time

    from compiler.runtime.quantizer_process import QuantizerDied, QuantizerProcess
    from compiler.runtime.stopping import TrialTimeout, TrialTimer

    marker = tmp_path / "hanging"
    process = QuantizerProcess(cheap_quantizer, str(marker))
    try:
        process({"a": 1}, tmp_path / "m.onnx", ["fc1"])
        assert json.loads((tmp_path / "m.onnx").read_text())["exclusions"] == ["fc1"]
        with pytest.raises(ValueError, match="no such activation"):  # the trial's own error, as raised there
            process({"fail": True}, tmp_path / "x.onnx", [])
        with pytest.raises(QuantizerDied, match="was killed by SIGSEGV during this trial"):
            process({"crash": True}, tmp_path / "x.onnx", [])
        process({"a": 2}, tmp_path / "m2.onnx", [])  # a fresh child after the crash
        assert (tmp_path / "m2.onnx").is_file()

        started = time.monotonic()
        with pytest.raises(TrialTimeout), TrialTimer(1.0):
            process({"hang": True}, tmp_path / "x.onnx", [])
        assert time.monotonic() - started < 30
        assert not pid_alive(int(marker.read_text()))  # killed, though it ignored SIGTERM
        marker.unlink()

        threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()  # Ctrl-C while the child hangs
        with pytest.raises(KeyboardInterrupt):
            process({"hang": True}, tmp_path / "x.onnx", [])
        assert not pid_alive(int(marker.read_text()))
        process({"a": 3}, tmp_path / "m3.onnx", [])
        assert (tmp_path / "m3.onnx").is_file()
    finally:
        process.close()


def test_a_crash_of_the_quantizer_process_fails_only_that_trial_naming_the_signal(tmp_path: Path) -> None:
    from compiler.runtime.quantizer_process import QuantizerProcess

    process = QuantizerProcess(cheap_quantizer, str(tmp_path / "hanging"))
    fake = FakeQuark()

    def quantize(config: dict[str, Any], output: Path) -> None:  # the XInt8Spec configurations crash the child
        process(dict(config, crash=config["activation"] == "XInt8Spec"), output, [])

    def score(model: Path) -> float:
        config = dict(json.loads(model.read_text())["config"])
        config.pop("crash")
        model.write_text(json.dumps(config))
        return fake.score(model)

    s = settings(tmp_path, n_trials=1)
    search = Search(s)
    search.attach(quantize, score)
    try:
        code = search.run(stage_configs(s.search_space, s.sampler, s.two_stage, s.n_trials, product_configs))
    finally:
        process.close()
    assert code is None and search.failures() == 2  # the two XInt8Spec grid configurations
    assert {t.user_attrs[contract.ATTR_ERROR] for t in search.trials("FAIL")} == {
        "QuantizerDied: the quantizer process was killed by SIGSEGV during this trial (SIGKILL: often the "
        "out-of-memory killer; SIGSEGV or SIGABRT: a crash in native code); a fresh one quantizes the next"}
    assert len(complete(search.grid_study)) == 4 and len(complete(search.sampler_study)) == 1


def test_a_new_study_in_the_same_folder_sets_the_earlier_studys_models_aside_instead_of_overwriting_them(
        tmp_path: Path, capsys: Any) -> None:
    """A changed space is a new study (its name carries the space's hash) whose trials count from 0 again: the
    earlier study's quantized_model_sampler_0.onnx must not be overwritten by the new study's."""
    run(settings(tmp_path, study_name="fake-aaa", n_trials=2), FakeQuark())
    earlier = {p.name: p.read_bytes() for p in tmp_path.glob("quantized_model_*.onnx")}
    assert "quantized_model_sampler_0.onnx" in earlier and "quantized_model_grid_0.onnx" in earlier
    capsys.readouterr()

    search, _ = run(settings(tmp_path, study_name="fake-bbb", n_trials=2, two_stage=False), FakeQuark())
    aside = tmp_path / "earlier_studies"
    kept = {p.relative_to(aside).as_posix(): p.read_bytes() for p in aside.rglob("*.onnx")}
    grid_files = {f"fake-aaa-grid/{n}": b for n, b in earlier.items() if "_grid_" in n}
    sampler_files = {f"fake-aaa/{n}": b for n, b in earlier.items() if "_sampler_" in n}
    assert kept == grid_files | sampler_files  # every earlier model, byte for byte, under its study's name
    out = capsys.readouterr().out
    assert "study 'fake-aaa' of an earlier version of this spec" in out and "moved to earlier_studies/fake-aaa/" in out
    new_models = {t.user_attrs[contract.ATTR_MODEL] for t in complete(search.sampler_study)}
    assert all((tmp_path / m).is_file() for m in new_models)

    run(settings(tmp_path, study_name="fake-bbb", n_trials=3, two_stage=False), FakeQuark())  # a resume moves nothing
    assert all((tmp_path / m).is_file() for m in new_models) and "earlier version" not in capsys.readouterr().out


def test_accuracy_control_steps_to_its_answer_stops_and_gives_up_a_slot_claimed_after_it(tmp_path: Path) -> None:
    from compiler.runtime.accuracy_control import STEP_ATTR

    needed = {0, 2}  # of 8 ranked groups, one node each: these two must stay float to be within tolerance
    quantized: list[dict[str, Any]] = []

    def quantize(config: dict[str, Any], output: Path) -> None:
        quantized.append(config)
        output.write_text(json.dumps(config))

    def score(model: Path) -> float:
        kept = set(json.loads(model.read_text())["keep_float"]["groups"])
        return 0.01 + 0.001 * len(kept) if needed <= kept else 0.2

    space = {"activation": ["Int8Spec"], "activation_params": {"symmetric": [True], "only_if": "activation"}}
    s = settings(tmp_path, two_stage=False, grid_configs=0, n_trials=20, search_space=space,
                 objectives=["accuracy", "size"], tolerance={"value": 0.05, "relative": False},
                 sensitivity={"search": {"strategy": "accuracy_control"}})
    search = Search(s)
    search.ranking_groups, search.ranking_sizes = 8, [1] * 8
    search.attach(quantize, score, float_nodes=lambda choice: {"choice": choice, "groups": choice["groups"],
                                                               "nodes": [f"n{g}" for g in choice["groups"]]})
    assert search.run([]) is None
    stop = search.sampler_study.user_attrs[contract.STOPPED_ATTR]
    assert stop["reason"] == "accuracy_control" and stop["answer"] == [0, 2]
    done = complete(search.sampler_study)
    assert len(done) == len(quantized) < 20  # one quantization a step, stopped once proven
    phases = [t.user_attrs[STEP_ATTR]["phase"] for t in sorted(done, key=lambda t: t.number)]
    assert phases[0] == "quantized" and set(phases) == {"quantized", "prefix", "drop"}
    best = write_best(search)
    assert best["config"]["keep_float"] == {"groups": [0, 2]}

    claimed = search.slots.claim(search.worker)  # a slot claimed once the answer is proven (another worker's race)
    assert claimed is not None
    study, trial, stage = claimed
    search.run_slot(study, trial, stage, [])
    given_up = study.get_trials(deepcopy=False)[trial.number]
    assert given_up.state.name == "FAIL" and "answer is proven" in given_up.user_attrs[contract.ATTR_ERROR]
    assert len(quantized) == len(done)


def test_two_workers_choosing_one_accuracy_control_step_quantize_it_once(tmp_path: Path) -> None:
    """The step is chosen and claimed under the slot lock: the second worker to choose the step the first is running
    leaves its trial unclaimed, so it waits for that result (scored()) instead of quantizing the step again (seen under
    load before the lock: a nine-step answer where one worker took eight)."""
    space = {"activation": ["Int8Spec"], "activation_params": {"symmetric": [True], "only_if": "activation"}}
    s = settings(tmp_path, two_stage=False, grid_configs=0, n_trials=20, search_space=space,
                 tolerance={"value": 0.05, "relative": False}, sensitivity={"search": {"strategy": "accuracy_control"}})
    first, second = Search(s, worker_index=0), Search(s, worker_index=1, joining=True)
    for worker in (first, second):
        worker.ranking_groups, worker.ranking_sizes = 8, [1] * 8
    claims = [worker.slots.claim(worker.worker) for worker in (first, second)]
    configs = [{"activation": "Int8Spec"}, {"activation": "Int8Spec"}]
    assert first.accuracy_step(claims[0][0], claims[0][1], configs[0])
    assert second.accuracy_step(claims[1][0], claims[1][1], configs[1])
    assert configs[0] == configs[1] == {"activation": "Int8Spec", "keep_float": {"groups": []}}  # the same step
    trials = {t.number: t for t in first.sampler_study.get_trials(deepcopy=False)}
    assert trials[claims[0][1].number].user_attrs[contract.ATTR_CONFIG] == configs[0]  # the first runs it
    assert contract.ATTR_CONFIG not in trials[claims[1][1].number].user_attrs  # the second does not claim it
    assert first.taken(configs[0], claims[1][1].number) and not first.taken(configs[0], claims[0][1].number)
