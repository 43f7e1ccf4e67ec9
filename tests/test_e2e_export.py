"""`qas export` with the real amd-quark: a recorded trial's model rebuilt from the study alone (after keep_models: best
removed it, with a keep_float prefix of the sensitivity ranking, from the grid stage) scores exactly the recorded value;
--pareto rebuilds the whole front; what cannot be exported is refused with a clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import EXAMPLE_DIR, needs_quark, qas
from .zoo import build

pytestmark = [pytest.mark.e2e, needs_quark]


def report(folder: Path) -> dict:
    done = qas("report", "autosearch_output", "--format", "json", cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_removed_trial_is_rebuilt_to_its_recorded_score(tmp_path: Path) -> None:
    zm = build("resnet_bn", tmp_path)
    zm.write_spec(tmp_path, preset="A8W8_SEARCH", n_trials=3, extra_yaml=(
        "search: {two_stage: true}\noutput: {keep_models: best}\n"
        "keep_float: {sensitivity: {method: L2, samples: 4}, search: {top_k: [0, 1, 2]}}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    r = report(tmp_path)
    out = tmp_path / "autosearch_output"
    lost = [t for t in r["all_trials"] if t["state"] == "COMPLETE" and t["stage"] == "sampler"
            and t["reused_from"] is None and not (out / t["model"]).exists()]
    assert lost, "keep_models: best removed no sampler model; the test proves nothing"
    trial = lost[0]

    target = tmp_path / "rebuilt" / "model.onnx"
    done = qas("export", "autosearch_output", "--trial", str(trial["number"]), "-o", "rebuilt/model.onnx",
               cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "exactly the value the study recorded" in done.stdout + done.stderr
    assert target.is_file() and "keep_float" in trial["config"]

    grid = next(t for t in r["all_trials"] if t["stage"] == "grid" and t["state"] == "COMPLETE")
    done = qas("export", "spec.yaml", "--trial", str(grid["number"]), "--stage", "grid", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / f"exported_grid_{grid['number']}.onnx").is_file()
    assert f"{grid['value']:.9g}" in done.stdout + done.stderr

    done = qas("export", "autosearch_output", "--trial", "99", cwd=tmp_path, timeout=900)
    assert done.returncode != 0 and "the sampler stage has no trial 99" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_pareto_rebuilds_every_member_of_the_front(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE_DIR, folder, ignore=shutil.ignore_patterns("autosearch_output"))
    spec = folder / "spec.yaml"
    spec.write_text(spec.read_text().replace("  sampler: TPE\n", "  sampler: NSGAII\n  two_stage: false\n"
                                             "  objectives: [accuracy, size]\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=folder, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    front = json.loads((folder / "autosearch_output" / "pareto.json").read_text())
    members = [m["trial_number"] for m in front["front"]]
    done = qas("export", "autosearch_output", "--pareto", cwd=folder, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for number in members:
        assert (folder / "autosearch_output" / f"exported_sampler_{number}.onnx").is_file()
    assert (done.stdout + done.stderr).count("exactly the value the study recorded") == len(members)


def test_what_cannot_be_exported_is_refused_with_a_clear_line(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE_DIR, folder, ignore=shutil.ignore_patterns("autosearch_output"))
    spec = folder / "spec.yaml"
    spec.write_text(spec.read_text().replace("  sampler: TPE\n", "  sampler: TPE\n  engine: autosearchpro\n"))
    assert qas("compile", "spec.yaml", cwd=folder).returncode == 0
    done = qas("export", "autosearch_output", "--trial", "0", cwd=folder)
    assert done.returncode == 2 and "engine autosearchpro cannot export a trial" in done.stderr
    done = qas("export", "autosearch_output", cwd=folder)
    assert done.returncode == 2 and "give --trial N or --pareto" in done.stderr
    done = qas("export", "autosearch_output", "--pareto", "--stage", "grid", cwd=folder)
    assert done.returncode == 2 and "drop --stage" in done.stderr
