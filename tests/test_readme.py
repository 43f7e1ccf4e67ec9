"""README.md stays true: its annotated spec compiles against the example's model and samples."""

from __future__ import annotations

from pathlib import Path

from compiler.pipeline import compile_spec

from .conftest import REPO, target_env


def test_the_readme_spec_validates_beside_the_example_model(example_copy: Path) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## The spec, format 1", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = example_copy / "readme.yaml"
    spec.write_text(block, encoding="utf-8")
    result = compile_spec(spec, target_env(REPO / "golden"))
    assert result.ok, [d.message for d in result.diagnostics]
