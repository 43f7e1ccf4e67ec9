"""The built wheel carries schemas/ and templates/: build it, install it into a clean venv, compile the example."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from .conftest import EXAMPLE_DIR, REPO

pytestmark = pytest.mark.e2e  # builds and installs a wheel: slow, though it runs no search


def test_wheel_installs_and_compiles_the_example(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "autosearch_output", "__pycache__",
                                                             "dist", "*.egg-info"))
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                            "--outdir", str(tmp_path / "dist"), str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("qas_compiler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    # a plain `pip install qas-compiler` brings what compiling and a CPU search need, torch pinned
    assert {"onnxruntime>=1.17", "torch==2.13.0", "amd-quark<0.14,>=0.13"} <= set(requires), requires
    assert "onnxruntime-gpu>=1.17; extra == 'cuda'" in requires
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    installed = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    # The dependencies come from this interpreter's site-packages, appended after the venv's own,
    # so `compiler` itself can only be the wheel's copy (a path added by .pth is no site dir: no editable hook).
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    clean = {k: v for k, v in os.environ.items()
             if k != "PYTHONPATH"}  # a checkout on PYTHONPATH would shadow the wheel
    where = subprocess.run([str(py), "-c", "import compiler; print(compiler.__file__)"], capture_output=True, text=True,
                           cwd=tmp_path, env=clean)
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    work = tmp_path / "work"
    shutil.copytree(EXAMPLE_DIR, work, ignore=shutil.ignore_patterns("autosearch_output"))
    compiled = subprocess.run([str(env_dir / "bin" / "qas"), "compile", str(work / "spec.yaml")], capture_output=True,
                              text=True, cwd=tmp_path, env=clean)
    assert compiled.returncode == 0, compiled.stderr
    # run_manifest.yaml records this machine's environment, so it is not committed: it only has to exist.
    assert (work / "autosearch_output" / "run_manifest.yaml").is_file()
    for name in ("tinycnn_autosearch.py", "quant_plan.json", "model_analysis.json"):
        assert (work / "autosearch_output" / name).read_text() == (EXAMPLE_DIR / "autosearch_output" / name).read_text()
    schema = subprocess.run([str(env_dir / "bin" / "qas"), "schema"], capture_output=True, text=True, cwd=tmp_path,
                            env=clean)
    assert schema.returncode == 0 and "2020-12" in schema.stdout
