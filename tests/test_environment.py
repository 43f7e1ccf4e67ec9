"""The environment pass and device gating on real interpreters: a bare venv, this one, `qas env`, --target-env."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import jsonschema
import pytest

from .conftest import REPO, qas


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with nothing installed (no pip, no system site-packages): optuna and quark are missing."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(root)
    return root / "bin" / "python"


def test_missing_optuna_in_the_target_interpreter_is_an_error_with_the_install_command(
        example_copy: Path, bare_python: Path) -> None:
    result = qas("compile", str(example_copy / "spec.yaml"), "--python", str(bare_python))
    assert result.returncode == 1, result.stderr
    assert "error[QAS601]: optuna is not installed in " + str(bare_python) in result.stderr
    assert f"hint: install it: {bare_python} -m pip install 'optuna>=4.0,<6'" in result.stderr
    assert "error[QAS601]: amd-quark is not installed" in result.stderr
    assert not (example_copy / "autosearch_output").exists()  # nothing half-written


def test_cuda_on_this_cpu_machine_is_refused_at_compile_time(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    spec.write_text(spec.read_text().replace("device: cpu", "device: cuda:0"))
    result = qas("compile", str(spec))  # probes this interpreter: CPU onnxruntime, CPU torch
    assert result.returncode == 1
    assert "error[QAS603]: device cuda:0 needs onnxruntime's CUDAExecutionProvider" in result.stderr
    assert "error[QAS604]: device cuda:0 needs a cuda build of torch" in result.stderr
    line = spec.read_text().splitlines().index("device: cuda:0") + 1
    assert f"spec.yaml:{line}:9: error[QAS603]" in result.stderr
    assert not (example_copy / "autosearch_output").exists()


def test_qas_env_writes_a_target_env_that_compiles_like_the_probe(example_copy: Path, tmp_path: Path) -> None:
    env = qas("env")
    assert env.returncode == 0, env.stderr
    document = json.loads(env.stdout)
    assert document["environment"]["packages"]["optuna"] and document["environment"]["torch_build"] == "cpu"
    quark_contract = Path(__import__("quark").__file__).parent / "_bundled_skills" / "_legacy_impl" / "shared" \
        / "contracts" / "env_context.schema.json"
    jsonschema.validate(document, json.loads(quark_contract.read_text()))  # Quark's own env_context contract
    target = tmp_path / "target.json"
    target.write_text(env.stdout)
    probed = qas("validate", "--format", "json", str(example_copy / "spec.yaml"))
    described = qas("validate", "--format", "json", str(example_copy / "spec.yaml"), "--target-env", str(target))
    probed_env = json.loads(probed.stdout)["plan"]["environment"]
    described_env = json.loads(described.stdout)["plan"]["environment"]
    assert probed_env.pop("source") == "probe" and described_env.pop("source") == "target-env"
    assert probed_env == described_env


def test_target_env_for_a_gpu_box_compiles_cuda_here(example_copy: Path, tmp_path: Path) -> None:
    document = json.loads(qas("env").stdout)
    document["environment"]["onnxruntime_providers"] = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    document["environment"]["torch_build"] = "cuda"
    document["hardware"] = {"accelerator": "nvidia-cuda", "gpu_count": 2}
    target = tmp_path / "gpu-box.json"
    target.write_text(json.dumps(document))
    spec = example_copy / "spec.yaml"
    spec.write_text(spec.read_text().replace("device: cpu", "device: cuda:1"))
    result = qas("compile", str(spec), "--target-env", str(target))
    assert result.returncode == 0, result.stderr
    manifest = (example_copy / "autosearch_output" / "run_manifest.yaml").read_text()
    assert "source: \"target-env\"" in manifest and "accelerator: \"nvidia-cuda\"" in manifest

    # The script repeats the gate at start-up: on this CPU machine it exits 2 before any work.
    script = example_copy / "autosearch_output" / "tinycnn_autosearch.py"
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert "qas: error: device cuda:1 is not available here: onnxruntime has no CUDAExecutionProvider" in run.stderr
    assert not (example_copy / "autosearch_output" / "tinycnn_study.journal").exists()


def test_the_script_names_missing_packages_before_any_work(example_copy: Path, bare_python: Path) -> None:
    assert qas("compile", str(example_copy / "spec.yaml")).returncode == 0
    script = example_copy / "autosearch_output" / "tinycnn_autosearch.py"
    run = subprocess.run([str(bare_python), str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "qas: error: missing packages: amd-quark>=0.13,<0.14, optuna>=4.0,<6" in run.stderr
    assert f"{bare_python} -m pip install 'amd-quark>=0.13,<0.14' 'optuna>=4.0,<6'" in run.stderr


@pytest.mark.parametrize("content, expected", [
    ("{not json", ":1:2: not valid JSON"),
    ('{"environment": {}, "hardware": {"accelerator": "cpu"}}', "at $.environment: 'os' is a required property"),
])
def test_a_bad_target_env_is_a_located_usage_error(example_copy: Path, tmp_path: Path, content: str,
                                                    expected: str) -> None:
    target = tmp_path / "target.json"
    target.write_text(content)
    result = qas("compile", str(example_copy / "spec.yaml"), "--target-env", str(target))
    assert result.returncode == 2
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert not (example_copy / "autosearch_output").exists()


def test_an_interpreter_that_is_not_there_is_a_usage_error(example_copy: Path, tmp_path: Path) -> None:
    result = qas("validate", str(example_copy / "spec.yaml"), "--python", str(tmp_path / "nope" / "python"))
    assert result.returncode == 2 and "no such interpreter" in result.stderr
    both = qas("validate", str(example_copy / "spec.yaml"), "--python", sys.executable,
               "--target-env", str(REPO / "golden" / "target_env.json"))
    assert both.returncode == 2 and "not both" in both.stderr
