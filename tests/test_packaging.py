"""pyproject.toml's dependencies: `pip install qas-compiler` alone has every package compile checks for, torch
pinned."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from compiler.check.requirements import (
    BLOCK_REQUIREMENTS,
    IMAGE_REQUIREMENTS,
    ORT_DISTRIBUTION,
    PLOT_REQUIREMENTS,
    REQUIREMENTS,
    accelerator_of,
)

from .conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
TORCH_PIN = "torch==2.13.0"  # QUARK-FACTS: an unpinned torch pulls a multi-GB CUDA build on these machines


def default_dependencies() -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, PROJECT["dependencies"])}


def test_the_default_install_has_every_package_the_environment_pass_checks() -> None:
    needed = REQUIREMENTS | PLOT_REQUIREMENTS | IMAGE_REQUIREMENTS | BLOCK_REQUIREMENTS
    have = default_dependencies()
    missing = sorted(name for name in needed if canonicalize_name(name) not in have)
    assert not missing, f"`pip install qas-compiler` would not compile a spec: add {missing} to the dependencies"
    for name, version_range in needed.items():
        declared = have[canonicalize_name(name)]
        assert not declared.marker and not declared.extras, declared
        # what pip installs lies inside what compile accepts, checked at the lowest version pip may pick
        lowest = [spec.version for spec in declared.specifier if spec.operator in ("==", ">=")]
        assert lowest, f"{declared}: give it a lower bound"
        assert all(Requirement(name + version_range).specifier.contains(v) for v in lowest), (declared, version_range)


def test_torch_is_pinned_wherever_it_is_required() -> None:
    requirements = PROJECT["dependencies"] + [r for extra in PROJECT["optional-dependencies"].values() for r in extra]
    torch = [r for r in requirements if canonicalize_name(Requirement(r).name) == "torch"]
    assert torch == [TORCH_PIN]
    for path in (REPO / "README.md", REPO / ".ci" / "run"):
        for mention in re.findall(r"torch\s*(?:[=<>!~]=|[<>])\s*[\w.+*]+", path.read_text(encoding="utf-8")):
            assert mention == TORCH_PIN, f"{path.name}: {mention}"


def test_each_gpu_extra_is_the_onnxruntime_build_compile_asks_for() -> None:
    extras = {name: list(map(Requirement, reqs)) for name, reqs in PROJECT["optional-dependencies"].items()}
    for device in ("cuda:0", "rocm:0"):
        accelerator = accelerator_of(device)
        (ort,) = extras[accelerator]
        assert ort.name == ORT_DISTRIBUTION[accelerator]
        assert str(ort.specifier) == REQUIREMENTS["onnxruntime"]
