"""The qas command line on real files: exit codes, --check, --force, refusal to overwrite, JSON output."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, qas


def test_compile_writes_four_files_and_the_runtime_and_rerun_is_a_no_op(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    first = qas("compile", str(spec))
    assert first.returncode == 0, first.stderr
    out = example_copy / "autosearch_output"
    assert sorted(p.name for p in out.iterdir()) == ["model_analysis.json", "qas_runtime", "quant_plan.json",
                                                      "run_manifest.yaml", "tinycnn_autosearch.py"]
    assert "qas_runtime/ (" in first.stderr
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert qas("compile", str(spec)).returncode == 0
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert qas("compile", "--check", str(spec)).returncode == 0


def test_check_reports_a_diff_and_writes_nothing(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    assert qas("compile", str(spec)).returncode == 0
    spec.write_text(spec.read_text().replace("n_trials: 3", "n_trials: 5"))
    script = example_copy / "autosearch_output" / "tinycnn_autosearch.py"
    before = script.read_text()
    checked = qas("compile", "--check", str(spec))
    assert checked.returncode == 1
    assert "-    n_trials=3," in checked.stdout and "+    n_trials=5," in checked.stdout
    assert script.read_text() == before
    assert checked.stderr.rstrip().endswith("run `qas compile " + str(spec) + "`")


def test_check_names_a_hand_edit_s_force_and_a_stray_runtime_file(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    assert qas("compile", str(spec)).returncode == 0
    out = example_copy / "autosearch_output"
    (out / "qas_runtime" / "extra.py").write_text("x = 1\n")
    checked = qas("compile", "--check", str(spec))
    assert checked.returncode == 1 and "extra.py: a file qas did not write in its runtime folder" in checked.stdout
    assert "delete the files it lists" in checked.stderr and "--force" not in checked.stderr
    (out / "qas_runtime" / "extra.py").unlink()
    (out / "tinycnn_autosearch.py").write_text((out / "tinycnn_autosearch.py").read_text() + "# mine\n")
    checked = qas("compile", "--check", str(spec))
    assert checked.returncode == 1 and "--force`" in checked.stderr


def test_hand_edited_script_is_not_overwritten_without_force(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    assert qas("compile", str(spec)).returncode == 0
    script = example_copy / "autosearch_output" / "tinycnn_autosearch.py"
    edited = script.read_text().replace("seed=0,", "seed=42,")
    script.write_text(edited)
    refused = qas("compile", str(spec))
    assert refused.returncode == 1
    assert "error[QAS801]" in refused.stderr and "edited by hand" in refused.stderr
    assert "plan for" not in refused.stdout  # nothing was written: no plan that reads as if it were
    assert script.read_text() == edited  # nothing lost
    forced = qas("compile", "--force", str(spec))
    assert forced.returncode == 0
    assert "seed=0," in script.read_text()


def test_files_qas_did_not_write_are_not_overwritten(example_copy: Path) -> None:
    out = example_copy / "autosearch_output"
    out.mkdir()
    (out / "run_manifest.yaml").write_text("mine: true\n")
    refused = qas("compile", str(example_copy / "spec.yaml"))
    assert refused.returncode == 1 and "error[QAS802]" in refused.stderr
    assert (out / "run_manifest.yaml").read_text() == "mine: true\n"
    assert not (out / "tinycnn_autosearch.py").exists()  # all or nothing


def _dir_line(spec: Path) -> str:
    """'spec.yaml:L:8:' for the value of output.dir in the example spec."""
    return f"spec.yaml:{spec.read_text().splitlines().index('  dir: autosearch_output') + 1}:8:"


def test_unwritable_output_dir_is_a_located_error(example_copy: Path) -> None:
    (example_copy / "autosearch_output").write_text("a file where the folder should be")
    spec = example_copy / "spec.yaml"
    for command in ("compile", "validate"):  # validate reports what compile would refuse, and writes nothing
        result = qas(command, str(spec))
        assert result.returncode == 1
        assert "error[QAS803]" in result.stderr and "Traceback" not in result.stderr
        assert f"{_dir_line(spec)} error[QAS803]: output.dir cannot be written: autosearch_output is a file" \
            in result.stderr
    assert (example_copy / "autosearch_output").read_text() == "a file where the folder should be"


def test_a_file_in_the_way_of_the_runtime_folder_is_reported_by_validate(example_copy: Path) -> None:
    out = example_copy / "autosearch_output"
    out.mkdir()
    (out / "qas_runtime").write_text("")
    result = qas("validate", str(example_copy / "spec.yaml"))
    assert result.returncode == 1 and "error[QAS803]" in result.stderr and "qas_runtime is a file" in result.stderr


def test_errors_found_while_writing_are_located_at_output_dir(example_copy: Path) -> None:
    out = example_copy / "autosearch_output"
    out.mkdir()
    (out / "run_manifest.yaml").write_text("mine: true\n")
    refused = qas("compile", str(example_copy / "spec.yaml"))
    assert f"{_dir_line(example_copy / 'spec.yaml')} error[QAS802]" in refused.stderr
    (out / "run_manifest.yaml").unlink()
    (out / "run_manifest.yaml").mkdir()  # a folder where compile writes a file: refused, not a crash
    result = qas("compile", str(example_copy / "spec.yaml"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{_dir_line(example_copy / 'spec.yaml')} error[QAS803]" in result.stderr
    assert "run_manifest.yaml is a folder" in result.stderr
    assert not (out / "tinycnn_autosearch.py").exists()


def test_errors_write_nothing_and_exit_1(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    spec.write_text(spec.read_text().replace("n_trials: 3", "n_trails: 3"))
    result = qas("compile", str(spec))
    assert result.returncode == 1
    assert ("spec.yaml:" in result.stderr and "error[QAS201]" in result.stderr
            and "did you mean 'n_trials'?" in result.stderr)
    assert not (example_copy / "autosearch_output").exists()


def test_json_format_carries_the_same_fields(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    spec.write_text(spec.read_text().replace("device: cpu", "device: gpu0"))
    result = qas("validate", "--format", "json", str(spec))
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["ok"] is False and document["plan"] is None
    (item,) = document["diagnostics"]
    assert item["code"] == "QAS205" and item["severity"] == "error" and item["path"] == "$.device"
    assert item["line"] == spec.read_text().splitlines().index("device: gpu0") + 1 and item["col"] == 9
    assert set(item) == {"file", "line", "col", "severity", "code", "message", "path", "hint"}


def test_json_format_carries_the_plan(example_copy: Path) -> None:
    result = qas("validate", "--format", "json", str(example_copy / "spec.yaml"))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    plan = document["plan"]
    assert document["ok"] is True and document["diagnostics"] == []
    assert plan["trials"] == {"requested": 3, "effective": 3, "quark_would_run": 3, "grid_configs": 3,
                              "models_produced": 6}
    assert plan["device"] == "cpu" and plan["metric"] == "L2" and plan["space"]["preset"] == "XINT8_SEARCH"
    assert plan["environment"]["source"] == "probe" and plan["environment"]["packages"]["optuna"]
    low, high = plan["time"]["total_s"]
    assert 0 < low <= high
    assert set(plan["time"]["per_trial_s"]) == {"plain", "adaround", "adaquant"}
    text = qas("validate", str(example_copy / "spec.yaml")).stdout
    assert "trials      3 of 3 requested, after 3 grid configs = 6 models" in text and "checked on  probe:" in text


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert qas("compile", str(tmp_path / "absent.yaml")).returncode == 2
    assert qas("compile", "--no-such-flag", "x.yaml").returncode == 2
    assert qas("presets", "NOPE").returncode == 2


def test_validate_writes_nothing(example_copy: Path) -> None:
    result = qas("validate", str(example_copy / "spec.yaml"))
    assert result.returncode == 0, result.stderr
    assert not (example_copy / "autosearch_output").exists()


def test_presets_and_schema_commands() -> None:
    listing = qas("presets")
    assert listing.returncode == 0
    assert "XINT8_SEARCH" in listing.stdout and " 8 " in listing.stdout
    shown = json.loads(qas("presets", "XINT8_SEARCH").stdout)
    assert shown["grid_stage_configs"] == 3 and shown["quark_discrete_size"] == 8
    schema = json.loads(qas("schema").stdout)
    assert schema["$schema"].endswith("2020-12/schema")


COMMANDS = ["compile", "validate", "run", "report", "dashboard", "presets", "env", "schema"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = qas(command, "--help")
    assert result.returncode == 0 and "Example" in result.stdout
    assert qas(command, "-h").stdout == result.stdout  # -h everywhere


def test_help_shows_flags_as_flags_and_arguments_by_name() -> None:
    top = qas("-h")
    assert top.returncode == 0 and "Usage: qas [OPTIONS] COMMAND" in top.stdout
    assert "<bool>" not in top.stdout and "--install-completion" in top.stdout
    usages = {}
    for command in COMMANDS:
        text = qas(command, "--help").stdout
        assert "<bool>" not in text, text  # not `--check <bool>`, nor `--help <bool>`
        usages[command] = next(line.strip() for line in text.splitlines() if "Usage:" in line)
        assert "{" not in usages[command]  # not `{spec}`
    assert usages["compile"] == "Usage: qas compile [OPTIONS] SPEC"
    assert usages["run"] == "Usage: qas run [OPTIONS] SPEC_OR_MANIFEST"
    assert usages["report"] == "Usage: qas report [OPTIONS] OUT"
    assert usages["dashboard"] == "Usage: qas dashboard [OPTIONS] OUT"
    assert usages["presets"] == "Usage: qas presets [OPTIONS] [NAME]"
    flags = qas("compile", "--help").stdout
    assert any(line.split()[1:3] == ["--check", "Write"] for line in flags.splitlines() if "--check" in line)
    assert any(line.split()[1:4] == ["--format", "<text|json>", "Diagnostics"] for line in flags.splitlines())


def test_shell_completion_is_installable_and_completes(tmp_path: Path) -> None:
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1", "HOME": str(tmp_path)}
    shown = subprocess.run([sys.executable, "-m", "compiler", "--show-completion", "bash"], capture_output=True,
                           text=True, env=env)
    assert shown.returncode == 0 and "complete -o default -F _qas_completion qas" in shown.stdout
    installed = subprocess.run([sys.executable, "-m", "compiler", "--install-completion", "bash"],
                               capture_output=True, text=True, env=env)
    assert installed.returncode == 0, installed.stderr
    assert "_QAS_COMPLETE=complete_bash" in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        found = subprocess.run([sys.executable, "-m", "compiler"], capture_output=True, text=True, env={
            **env, "_QAS_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)})
        assert found.returncode == 0, found.stderr
        return found.stdout.split()

    assert complete("qas rep") == ["report"]
    assert complete("qas report --format ") == ["text", "json"]
    assert complete("qas presets XINT") == ["XINT8_SEARCH"]


def test_internal_errors_exit_3_with_a_report_line(example_copy: Path) -> None:
    code = ("import sys; import compiler.commands.pipeline as p; from compiler.commands import cli;"
            "p.compile_spec = cli.compile_spec = lambda s: 1/0;"
            "sys.argv = ['qas', 'validate', sys.argv[1]]; cli.run()")
    result = subprocess.run([sys.executable, "-c", code, str(example_copy / "spec.yaml")], capture_output=True,
                            text=True)
    assert result.returncode == 3
    assert "internal error" in result.stderr and "please report" in result.stderr


def test_paths_resolve_relative_to_the_spec_not_the_cwd(example_copy: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = qas("compile", str(example_copy / "spec.yaml"), cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert (example_copy / "autosearch_output" / "tinycnn_autosearch.py").is_file()
    assert not any(elsewhere.iterdir())


def test_repo_root_is_clean_of_golden_writes() -> None:
    # the golden harness renders to memory; no case folder gets an output dir
    assert not list((REPO / "golden").glob("*/autosearch_output"))


def test_printed_commands_are_shell_quoted(example_copy: Path, tmp_path: Path) -> None:
    odd = tmp_path / "it's a dir"
    example_copy.rename(odd)
    spec = odd / "spec.yaml"
    result = qas("compile", str(spec))
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("run it: ")]
    assert shlex.split(line.removeprefix("run it: ")) == [
        "python", str(odd / "autosearch_output" / "tinycnn_autosearch.py")]
    spec.write_text(spec.read_text().replace("n_trials: 3", "n_trials: 4"))
    stale = qas("compile", "--check", str(spec))
    assert stale.returncode == 1
    hinted = stale.stderr.split("run `", 1)[1].split("`", 1)[0]
    assert shlex.split(hinted) == ["qas", "compile", str(spec)]


def test_install_hints_quote_the_interpreter() -> None:
    from compiler.check.requirements import install_command

    command = install_command("/opt/my venv/bin/python", "optuna", ">=4.0,<6", "cpu")
    assert command == "'/opt/my venv/bin/python' -m pip install 'optuna>=4.0,<6'"
    assert shlex.split(command)[0] == "/opt/my venv/bin/python"
