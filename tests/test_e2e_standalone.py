"""End to end with the real amd-quark: the output folder runs where qas cannot be imported, with plots on, under both
engines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import needs_quark, qas

pytestmark = [pytest.mark.e2e, needs_quark]

# Runs a script as __main__ in an interpreter where importing qas's package fails, as on a machine without qas.
WITHOUT_QAS = """
import runpy, sys

class NoQas:
    def find_spec(self, name, path=None, target=None):
        if name == "compiler" or name.startswith("compiler."):
            raise ImportError("qas is not installed on this machine")

sys.meta_path.insert(0, NoQas())
script = sys.argv.pop(1)
sys.argv[0] = script
runpy.run_path(script, run_name="__main__")
"""


@pytest.mark.parametrize("engine", ["qas", "autosearchpro"])
def test_a_copied_output_folder_runs_without_qas_and_writes_its_plots(example_copy: Path, tmp_path: Path,
                                                                      engine: str) -> None:
    spec = example_copy / "spec.yaml"
    text = spec.read_text().replace("  n_trials: 3", f"  engine: {engine}\n  n_trials: 2")
    spec.write_text(text.replace("  dir: autosearch_output", "  dir: autosearch_output\n  plots: true"))
    assert qas("compile", str(spec)).returncode == 0
    moved = tmp_path / "elsewhere"  # the whole workspace moved, as to a GPU box: relative paths still hold
    shutil.copytree(example_copy, moved)
    script = moved / "autosearch_output" / "tinycnn_autosearch.py"
    ran = subprocess.run([sys.executable, "-c", WITHOUT_QAS, str(script)], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    out = script.parent
    best = json.loads((out / "best_config.json").read_text())
    assert best["trials_complete"] == 2 and best["stage"] == "sampler"
    assert "qas is not installed" not in ran.stderr
    plots = sorted(p.name for p in out.rglob("*.html"))
    if engine == "qas":
        assert plots == ["optimization_history.html"] and (out / "best_model.onnx").is_file()
    else:
        assert plots, "Quark's plot_results wrote no HTML"
