"""`qas dashboard`: which host it listens on, which folder it means, a clean error for what is missing, a storage
that never writes the study; and end to end, optuna-dashboard serving a real search's journal, looked at with
headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .conftest import free_port, needs_quark, qas


def test_loopback_hosts_are_fine_and_any_other_needs_allow_remote() -> None:
    from compiler.commands.dashboard import host_problem, remote_warning

    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert host_problem(host, False) is None and remote_warning(host) is None
    for host in ("0.0.0.0", "192.168.1.5", "::", "box.example.org"):
        refused = host_problem(host, False)
        assert refused is not None and "ssh -L 8080:127.0.0.1:8080" in refused and "--allow-remote" in refused
        assert host_problem(host, True) is None
        assert "warning" in remote_warning(host)
    assert "every network interface" in remote_warning("0.0.0.0")


def test_a_non_loopback_host_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    ran = qas("dashboard", str(tmp_path), "--host", "0.0.0.0")
    assert ran.returncode == 2
    assert "qas: error: --host 0.0.0.0 would let every machine" in ran.stderr and "Traceback" not in ran.stderr


def test_a_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.commands.dashboard import require_dashboard

    assert require_dashboard() is None
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)  # import raises ImportError
    message = require_dashboard()
    assert message is not None and "pip install 'optuna-dashboard>=0.21,<0.22'" in message


def test_a_folder_without_a_manifest_or_a_path_that_is_not_there_is_a_clean_error(tmp_path: Path) -> None:
    ran = qas("dashboard", str(tmp_path))
    assert ran.returncode == 2 and "no run_manifest.yaml in" in ran.stderr and "Traceback" not in ran.stderr
    ran = qas("dashboard", str(tmp_path / "nothing.yaml"))
    assert ran.returncode == 2 and "no output folder, run_manifest.yaml or spec at" in ran.stderr


@pytest.fixture
def compiled(example_copy: Path) -> Path:
    """The example compiled (its output folder has run_manifest.yaml and no study yet)."""
    ran = qas("compile", str(example_copy / "spec.yaml"))
    assert ran.returncode == 0, ran.stderr
    return example_copy / "autosearch_output"


def test_a_search_that_has_not_run_is_a_clean_error_and_no_study_is_created(compiled: Path) -> None:
    for target in (compiled, compiled / "run_manifest.yaml", compiled.parent / "spec.yaml"):
        ran = qas("dashboard", str(target), "--port", str(free_port()))
        assert ran.returncode == 2, ran.stderr
        assert "no study file" in ran.stderr and "has the search run?" in ran.stderr and "Traceback" not in ran.stderr
    assert not list(compiled.glob("*journal*"))


def test_a_journal_without_the_search_study_is_a_clean_error_and_stays_as_it_was(compiled: Path) -> None:
    import optuna

    journal = compiled / "tinycnn_study.journal"
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    optuna.create_study(study_name="someone-else", storage=storage)
    before = journal.read_bytes()
    ran = qas("dashboard", str(compiled), "--port", str(free_port()))
    assert ran.returncode == 2
    assert "no study 'tinycnn-" in ran.stderr and "it holds 'someone-else'" in ran.stderr
    assert journal.read_bytes() == before


def seed_studies(out: Path) -> tuple[str, object]:
    """The compiled example's sampler and grid studies in its journal, one trial each; (sampler study name, the
    writing storage) out."""
    import optuna

    from compiler.report.manifest import load_manifest

    name = load_manifest(out / "run_manifest.yaml")["outputs"]["study"]["name"]
    writer = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(out / "tinycnn_study.journal")))
    for study_name in (name, name + "-grid"):
        optuna.create_study(study_name=study_name, storage=writer).optimize(lambda t: 0.5, n_trials=1)
    return name, writer


def test_a_port_in_use_is_a_clean_error(compiled: Path) -> None:
    seed_studies(compiled)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ran = qas("dashboard", str(compiled), "--port", str(taken.getsockname()[1]))
    assert (ran.returncode == 2 and "cannot listen on 127.0.0.1:" in ran.stderr
            and "hint: pick another --port" in ran.stderr)
    assert "Traceback" not in ran.stderr


def test_the_storage_reads_the_study_refuses_every_write_and_shows_the_objective_names(compiled: Path) -> None:
    import optuna

    from compiler.commands.dashboard import ReadOnlyError, open_study

    journal = compiled / "tinycnn_study.journal"
    name, writer = seed_studies(compiled)
    before = journal.read_bytes()
    opened = open_study(compiled)
    assert not isinstance(opened, str), opened
    storage, facts = opened
    assert facts["studies"] == [name, name + "-grid"] and facts["objectives"] == ["L2"]
    studies = storage.get_all_studies()
    assert [s.system_attrs["study:metric_names"] for s in studies] == [["L2"], ["L2"]]
    assert storage.get_all_trials(studies[0]._study_id)[0].value == 0.5
    for write in (lambda: storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "new"),
                  lambda: storage.delete_study(studies[0]._study_id),
                  lambda: storage.set_study_system_attr(studies[0]._study_id, "dashboard:note", "x"),
                  lambda: storage.create_new_trial(studies[0]._study_id),
                  lambda: storage._inner._backend.append_logs([{"op_code": 0}])):
        with pytest.raises(ReadOnlyError):
            write()
    assert journal.read_bytes() == before
    assert "study:metric_names" not in writer.get_study_system_attrs(studies[0]._study_id)  # shown, never written


def test_a_database_study_needs_its_variable_and_never_prints_the_url(compiled: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.commands.dashboard import _storage

    monkeypatch.delenv("QAS_TEST_URL", raising=False)
    assert "$QAS_TEST_URL is not set here" in _storage(compiled / "x.journal", "QAS_TEST_URL")
    monkeypatch.setenv("QAS_TEST_URL", "mysql://user:s3cret@db/x")
    problem = _storage(compiled / "x.journal", "QAS_TEST_URL")
    assert "not a PostgreSQL URL" in problem and "s3cret" not in problem


def test_a_postgres_study_is_read_without_writing(postgres: Any, compiled: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    from compiler.commands.dashboard import ReadOnlyError, ReadOnlyStorage, _storage

    url = postgres.new_database()
    optuna.create_study(study_name="pg-study", storage=url).optimize(lambda t: 1.0, n_trials=1)
    monkeypatch.setenv("QAS_TEST_URL", url)
    storage = _storage(compiled / "unused.journal", "QAS_TEST_URL")
    assert [s.study_name for s in storage.get_all_studies()] == ["pg-study"]
    # the session itself is read-only: even the raw storage cannot write through it
    with pytest.raises(optuna.exceptions.StorageInternalError) as raised:
        storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "another")
    assert "read-only transaction" in str(raised.value.__cause__)
    with pytest.raises(ReadOnlyError):
        ReadOnlyStorage(storage, {}).create_new_study([optuna.study.StudyDirection.MINIMIZE], "another")
    assert optuna.get_all_study_names(url) == ["pg-study"]


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.e2e
@needs_quark
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_the_dashboard_serves_a_real_search_read_only_and_chromium_shows_its_trials(example_copy: Path,
                                                                                    tmp_path: Path) -> None:
    from PIL import Image

    ran = qas("run", str(example_copy / "spec.yaml"), "--yes")
    assert ran.returncode == 0, ran.stderr[-3000:]
    out = example_copy / "autosearch_output"
    journal = out / "tinycnn_study.journal"
    before = journal.read_bytes()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "compiler", "dashboard", str(example_copy / "spec.yaml"),
                               "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        summaries = None
        for _ in range(600):  # until it answers; the machine may be loaded, so no tight deadline
            try:
                summaries = get_json(f"{base}/api/studies")["study_summaries"]
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, server.communicate()[1]
                time.sleep(0.5)
        assert summaries is not None
        ids = {s["study_name"]: s["study_id"] for s in summaries}
        sampler, grid = sorted(ids, key=len)
        assert grid == sampler + "-grid"
        for name in (sampler, grid):
            detail = get_json(f"{base}/api/studies/{ids[name]}?after=0")
            assert detail["objective_names"] == ["L2"]
            assert [t["state"] for t in detail["trials"]] == ["Complete"] * 3
            keys = {a["key"] for t in detail["trials"] for a in t["user_attrs"]}
            assert {"config", "stage", "model"} <= keys
        # a write through the dashboard's API is refused and changes nothing
        create = urllib.request.Request(f"{base}/api/studies", method="POST",
                                        headers={"Content-Type": "application/json"},
                                        data=json.dumps({"study_name": "x", "directions": ["minimize"]}).encode())
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(create, timeout=30)
        assert len(get_json(f"{base}/api/studies")["study_summaries"]) == 2

        chromium = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--virtual-time-budget=20000"]
        shot = tmp_path / "study.png"
        subprocess.run([*chromium, "--window-size=1400,1000", f"--screenshot={shot}",
                        f"{base}/dashboard/studies/{ids[sampler]}"], capture_output=True, timeout=300, check=True)
        image = Image.open(shot).convert("RGB")
        assert image.size == (1400, 1000)
        assert len(image.getcolors(1 << 20) or []) > 50  # a drawn page, not a blank one
        dom = subprocess.run([*chromium, "--dump-dom", f"{base}/dashboard/studies/{ids[grid]}/trials"],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        assert all(f"Trial {n}" in dom for n in range(3))  # the trial list, rendered by the page's JS
        assert "quantized_model_grid_0.onnx" in dom  # the first trial's user attributes
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
    assert journal.read_bytes() == before
    # qas report takes the spec too; its heading names the folder as the spec does, never the temp path
    reported = qas("report", str(example_copy / "spec.yaml"))
    assert reported.returncode == 0, reported.stderr
    heading = (out / "report.md").read_text(encoding="utf-8").splitlines()[0]
    assert heading == "# qas report: tinycnn (autosearch\\_output)" and str(tmp_path) not in reported.stdout
    assert "trial time   median" in reported.stdout and "; float model " in reported.stdout
    if os.environ.get("QAS_KEEP_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["QAS_KEEP_SCREENSHOT"])


def test_an_autosearchpro_sqlite_study_is_read_through_a_read_only_connection(tmp_path: Path) -> None:
    import optuna

    from compiler.commands.dashboard import _storage

    db = tmp_path / "tiny_study.db"
    optuna.create_study(study_name="s", storage=f"sqlite:///{db}").optimize(lambda t: 0.25, n_trials=1)
    before = db.read_bytes()
    storage = _storage(db, None)
    [study] = storage.get_all_studies()
    assert study.study_name == "s" and storage.get_all_trials(study._study_id)[0].value == 0.25
    with pytest.raises(optuna.exceptions.StorageInternalError) as raised:
        storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "another")
    assert "readonly" in str(raised.value.__cause__)
    assert db.read_bytes() == before
