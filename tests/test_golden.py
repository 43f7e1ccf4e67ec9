"""Golden cases: golden/<case>/spec.yaml in; every file compile renders, diagnostics.txt and plan.txt must match
expected/.

Adding a case is adding a folder. `pytest --update-golden` rewrites expected/; review it in git diff.
Error cases hold only diagnostics.txt. The target environment is golden/target_env.json, or the case's
own target_env.json. Nothing is written outside expected/ (compile renders to memory).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compiler.back.summary import plan_summary, summary_text
from compiler.commands.pipeline import compile_spec
from compiler.diagnostics import to_text
from compiler.runtime.contract import RUNTIME_PACKAGE

from .conftest import GOLDEN, target_env

CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "spec.yaml").is_file())


def rendered(case_dir: Path) -> dict[str, str]:
    result = compile_spec(case_dir / "spec.yaml", target_env(case_dir))
    # The runtime copy is the same for every case; tests/test_runtime_copy.py pins it against the package.
    files = {name: text for name, text in result.files.items() if not name.startswith(RUNTIME_PACKAGE + "/")}
    files["diagnostics.txt"] = to_text(result.diagnostics, "spec.yaml")
    if result.plan is not None:
        files["plan.txt"] = summary_text(plan_summary(result.plan))  # what validate/compile print
    return files


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, update_golden: bool) -> None:
    case_dir = GOLDEN / case
    expected_dir = case_dir / "expected"
    actual = rendered(case_dir)
    if update_golden:
        shutil.rmtree(expected_dir, ignore_errors=True)
        expected_dir.mkdir()
        for name, text in actual.items():
            (expected_dir / name).write_text(text, encoding="utf-8", newline="\n")
    expected = {p.name: p.read_text(encoding="utf-8") for p in sorted(expected_dir.iterdir())}
    assert sorted(actual) == sorted(expected), "a different set of files was rendered"
    for name in expected:
        assert actual[name] == expected[name], f"{case}/{name} differs; run pytest --update-golden and read the diff"


def test_every_code_has_a_golden_case_or_a_named_test() -> None:
    from compiler.codes import CODES

    seen = "".join((GOLDEN / c / "expected" / "diagnostics.txt").read_text() for c in CASES)
    # emit-stage and disk-size codes need real files or a full disk; tests/test_cli.py and
    # tests/test_budget.py and tests/test_intake.py exercise them on real files instead, and
    # tests/test_yaml_limits.py the spec size limit (a golden spec over 256 KiB is not worth committing).
    tested_elsewhere = {"QAS104", "QAS405", "QAS406", "QAS704", "QAS801", "QAS802", "QAS804"}
    missing = [c for c in CODES if f"[{c}]" not in seen and c not in tested_elsewhere]
    assert not missing, f"codes without a golden case: {missing}"
