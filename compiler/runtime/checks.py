"""Start-up checks: settings in; nothing out, or a clear message and a non-zero exit before any work."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

from . import contract
from .console import warn


class SearchError(SystemExit):
    """A stop with a message for the user (not a bug): printed as `qas: error: ...`, exit EXIT_USAGE."""


def fail(message: str) -> None:
    """Stop before (or instead of) any work, with a message and a non-zero exit."""
    warn(f"qas: error: {message}")
    raise SearchError(contract.EXIT_USAGE)


def missing_packages(requirements: dict[str, str]) -> list[str]:
    """Package -> version range in; the `package<range>` of each one this interpreter cannot import out."""
    missing = []
    for package, version_range in requirements.items():
        module = contract.IMPORT_NAMES.get(package, package)
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(f"{package}{version_range}")
    return missing


def check_packages(requirements: dict[str, str]) -> None:
    """Exit with the install command when a package the search needs is missing from this interpreter."""
    missing = missing_packages(requirements)
    if missing:
        fail("missing packages: " + ", ".join(missing) + "; install them: "
             + f"{sys.executable} -m pip install " + " ".join(repr(m) for m in missing))


def changed_model_files(model_path: Path, expected: dict[str, str]) -> list[str]:
    """The model's folder and {file name: sha256 at compile time} in; the names whose content differs now out."""
    changed = []
    for name, digest in expected.items():
        try:
            with (model_path.parent / name).open("rb") as handle:
                found = hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError:
            found = None
        if found != digest:
            changed.append(name)
    return changed


def check_model(model_path: Path, expected: dict[str, str]) -> None:
    """Exit unless the model (and its external data) are the files compile checked, byte for byte."""
    changed = changed_model_files(model_path, expected)
    if changed:
        fail(f"the model changed since compile ({', '.join(changed)} in {os.path.normpath(model_path.parent)} "
             "differs or is gone); "
             "recompile the spec (qas compile SPEC, or qas run SPEC) so its checks and estimates hold for this model")


def check_device(device: str) -> None:
    """Exit unless `device` is usable in this interpreter; never fall back to the CPU."""
    if device == "cpu":
        return
    kind, index = device.split(":")
    import onnxruntime
    import torch

    provider = contract.PROVIDERS[kind][0]
    problems = []
    if provider not in onnxruntime.get_available_providers():
        problems.append(f"onnxruntime has no {provider}")
    built_for_rocm = getattr(torch.version, "hip", None) is not None
    if (kind == "rocm") != built_for_rocm:
        problems.append(f"torch {torch.__version__} is not a {kind} build")
    elif not torch.cuda.is_available() or torch.cuda.device_count() <= int(index):
        problems.append(f"torch sees {torch.cuda.device_count() if torch.cuda.is_available() else 0} GPU(s)")
    if problems:
        fail(f"device {device} is not available here: " + "; ".join(problems))
