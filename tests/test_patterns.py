"""keep_float.blocks patterns (issue 18.14): matched with RE2 in compile and at run time alike, in time linear in the
node name whatever the pattern; a pattern RE2 refuses (or a count it would misread) is a located QAS341, never a
hang nor a crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler.commands.pipeline import compile_spec
from compiler.runtime.patterns import PatternError, block_pattern
from compiler.runtime.sensitivity_rank import group_nodes

from .conftest import GOLDEN, target_env

LONG = "a" * 40 + "b"  # `(a+)+$` backtracks 2**40 times on it in Python's re
NESTED = "(" * 1000 + "relu" + ")" * 1000  # Python's re: RecursionError


def long_named_model(folder: Path) -> Path:
    """A float model whose node names are what a backtracking engine chokes on, and one .npy sample."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name=LONG),
             helper.make_node("Relu", ["m"], ["y"], name="relu_" + "x" * 60)]
    graph = helper.make_graph(nodes, "long", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.eye(4, dtype=np.float32).ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "long.onnx"
    onnx.save(model, path)
    (folder / "calib").mkdir()
    np.save(folder / "calib" / "0.npy", np.ones((1, 4), np.float32))
    return path


def spec_with_blocks(folder: Path, patterns: list[str]) -> Path:
    long_named_model(folder)
    lines = "\n".join(f"    b{i}: [{p!r}]" for i, p in enumerate(patterns))  # single-quoted YAML: no escapes
    spec = folder / "spec.yaml"
    spec.write_text(f"qas: 1\nname: blocks\nmodel: long.onnx\ncalibration: {{folder: calib}}\n"
                    f"search: {{preset: A8W8_SEARCH, n_trials: 2}}\nkeep_float:\n  blocks:\n{lines}\n"
                    "  search: {top_k: [0, 1]}\ndevice: cpu\n", encoding="utf-8")
    return spec


def test_hostile_block_patterns_compile_to_located_errors_not_a_hang_or_a_crash(tmp_path: Path) -> None:
    patterns = ["(a+)+$", "(.*)" * 150 + "!", "a{4294967296}", NESTED, "x(?=y)", "conv(", "relu_x{60}$"]
    spec = spec_with_blocks(tmp_path, patterns)
    # Before RE2 this compile ran for hours (or exited 3); the generous limit only turns a hang into a failure.
    done = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "please report" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if ": error[" in line]
    assert errors == [
        "spec.yaml:8:10: error[QAS340]: block 'b0': pattern '(a+)+$' matches no node of the model",
        "spec.yaml:9:10: error[QAS340]: block 'b1': pattern " + repr("(.*)" * 150 + "!")[:77] + "... matches no node "
        "of the model",
        "spec.yaml:10:10: error[QAS341]: block 'b2': 'a{4294967296}' is not a pattern RE2 can match in linear time: "
        "invalid repetition size: {4294967296} (RE2 repeats at most 1000 times)",
        "spec.yaml:12:10: error[QAS341]: block 'b4': 'x(?=y)' is not a pattern RE2 can match in linear time: "
        "invalid perl operator: (?=",
        "spec.yaml:13:10: error[QAS341]: block 'b5': 'conv(' is not a pattern RE2 can match in linear time: "
        "missing ): conv(",
    ], done.stderr  # the nested groups and the count match a node: no error
    assert "hint: patterns are RE2 regular expressions" in done.stderr
    assert not (tmp_path / "autosearch_output").exists()  # nothing half-written


def test_the_script_requires_re2_only_with_blocks(tmp_path: Path) -> None:
    spec = spec_with_blocks(tmp_path, ["^a+b$"])
    result = compile_spec(spec, target_env(GOLDEN))
    assert result.ok, result.diagnostics
    assert result.plan.settings.requirements["google-re2"] == ">=1.1"
    script = next(text for name, text in result.files.items() if name.endswith("_autosearch.py"))
    assert "'google-re2': '>=1.1'" in script  # the script checks it at start-up (runtime/checks.py)
    plain = spec.read_text(encoding="utf-8").replace("  blocks:\n    b0: ['^a+b$']\n", "")
    spec.write_text(plain, encoding="utf-8")
    result = compile_spec(spec, target_env(GOLDEN))
    assert result.ok and "google-re2" not in result.plan.settings.requirements


def test_compile_without_re2_in_the_target_says_what_to_install(tmp_path: Path) -> None:
    spec = spec_with_blocks(tmp_path, ["^a+b$"])
    env = target_env(GOLDEN)
    del env.packages["google-re2"]  # a private copy, read from the file for this test
    found = [d for d in compile_spec(spec, env).diagnostics if d.code == "QAS601"]
    assert len(found) == 1 and "google-re2 is not installed" in found[0].message
    assert "pip install 'google-re2>=1.1'" in found[0].hint


def test_the_runtime_groups_nodes_with_the_same_engine() -> None:
    candidates = {name: [name] for name in (LONG, "relu1", "conv1")}  # each candidate's float nodes
    assert group_nodes(candidates, {"odd": ["(a+)+$"], "relus": [NESTED], "any": ["(.*)" * 150 + "1$"]}) == {
        LONG: [LONG], "relus": ["relu1"], "any": ["conv1"]}


@pytest.mark.parametrize("pattern, reason", [
    ("a{1001}", "invalid repetition size: {1001}"),
    ("a{2," + "9" * 5000 + "}", "invalid repetition size: {2,9999"),  # int() would refuse 5000 digits
    ("a{,5}", "repetition {,5} has no lower count: write {0,5}"),  # Python's {0,5}; RE2 would read it as text
    ("a{007}", "repetition {007} has a leading zero: write {7}"),  # the same
    (r"(a)\1", "invalid escape sequence: \\1"),
    ("conv\ud800", "character '\\ud800' at 4 is not valid Unicode text"),  # YAML's "\ud800": no UTF-8 for RE2
])
def test_patterns_re2_cannot_run_as_python_would_are_refused_with_the_reason(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as refused:
        block_pattern(pattern)
    assert str(refused.value).startswith(reason)


@pytest.mark.parametrize("pattern, name", [("[{]9999}", "{9999}"), (r"\{9999}", "{9999}"), ("[]{]9999}", "{9999}"),
                                           ("^conv[0-9]{1,3}$", "conv12"), ("a{1000}", "a" * 1000),
                                           ("a{0,1000}b", "b")])
def test_braces_that_are_not_a_count_and_counts_within_the_limit_match(pattern: str, name: str) -> None:
    assert block_pattern(pattern).search(name)


def test_a_compiler_without_re2_says_so_instead_of_crashing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # `import re2` raises ImportError
    found = compile_spec(spec_with_blocks(tmp_path, ["^a+b$"]), target_env(GOLDEN)).diagnostics
    assert [(d.code, d.path) for d in found] == [("QAS601", ("keep_float", "blocks", "b0", 0))]
    assert f"google-re2 is not installed in {sys.executable}" in found[0].message
    assert found[0].hint.endswith("(pip install google-re2)")
