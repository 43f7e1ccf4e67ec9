"""One output folder, one spec: a second spec compiled (or run) into a folder another spec's run_manifest.yaml owns
is refused at output.dir (QAS804), naming the owner; recompiling the owner itself stays fine."""

from __future__ import annotations

from pathlib import Path

from .conftest import qas


def _other_spec(example: Path) -> Path:
    """A second spec beside the example's, with its own name, writing into the same output.dir."""
    other = example / "other.yaml"
    other.write_text((example / "spec.yaml").read_text().replace("name: tinycnn", "name: other"))
    return other


def _dir_line(spec: Path) -> str:
    return f"{spec.name}:{spec.read_text().splitlines().index('  dir: autosearch_output') + 1}:8:"


def test_a_second_spec_is_refused_in_a_folder_another_spec_owns(example_copy: Path) -> None:
    spec, out = example_copy / "spec.yaml", example_copy / "autosearch_output"
    assert qas("compile", str(spec)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    other = _other_spec(example_copy)
    for command in ("compile", "run"):
        refused = qas(command, str(other), "--yes") if command == "run" else qas(command, str(other))
        assert refused.returncode == 1, refused.stderr
        assert f"{_dir_line(other)} error[QAS804]" in refused.stderr and "Traceback" not in refused.stderr
        assert f"holds the search of another spec, {out / '../spec.yaml'!s}".replace("/autosearch_output/..", "") \
            in refused.stderr
        assert "hint: choose another output.dir" in refused.stderr
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing replaced
        assert not (out / "other_autosearch.py").exists()
    assert qas("compile", str(spec)).returncode == 0  # the owner recompiles as ever
    assert qas("compile", "--force", str(other)).returncode == 0  # taken over on purpose
    assert (out / "other_autosearch.py").is_file()
