"""README.md stays true: its annotated spec compiles against the example's model and samples; its first command
installs torch's CPU build as .ci/run does."""

from __future__ import annotations

from pathlib import Path

from compiler.commands.pipeline import compile_spec

from .conftest import REPO, target_env


def test_the_readme_spec_validates_beside_the_example_model(example_copy: Path) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## The spec, format 1", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = example_copy / "readme.yaml"
    spec.write_text(block, encoding="utf-8")
    result = compile_spec(spec, target_env(REPO / "golden"))
    assert result.ok, [d.message for d in result.diagnostics]


TORCH_CPU = "pip install --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def test_the_first_command_installs_torch_s_cpu_build_before_qas_as_ci_does() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first = text.split("```bash\n", 1)[1].split("\n", 1)[0]
    assert first.index(TORCH_CPU) < first.index("pip install -e '.[test]'") < first.index("qas run specs/example")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index(TORCH_CPU.replace("pip install", "pip install -q")) < ci.index("pip install -q -e '.[test]'")
