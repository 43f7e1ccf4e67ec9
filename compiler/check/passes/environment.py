"""Environment and device-gating pass: Spec and target Environment in; QAS601-606 out.

Every package the script needs must be installed within its range, with the exact install command
as the hint. A `cuda:N` / `rocm:N` device needs that accelerator's onnxruntime execution provider
and a torch built for it; a missing one is an error, never a CPU fallback.
"""

from __future__ import annotations

from collections.abc import Iterator

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from compiler.check.requirements import (
    BLOCK_REQUIREMENTS,
    IMAGE_REQUIREMENTS,
    ORT_DISTRIBUTION,
    ORT_PROVIDERS,
    PYTHON_RANGE,
    TORCH_INDEX,
    TRACKING_REQUIREMENTS,
    accelerator_of,
    image_readers,
    install_command,
    requirements,
)
from compiler.check.resolved import engine, quark_runs_search
from compiler.check.target_env import Environment
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec

GPU_PROVIDERS = ("CUDAExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider")


def _within(version: str, version_range: str) -> bool:
    try:
        return SpecifierSet(version_range).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def check(spec: Spec, env: Environment) -> Iterator[Diagnostic]:
    accelerator = accelerator_of(spec.device)
    python = env.python_command
    where = "the target environment" if env.source == "target-env" else python
    if not _within(env.python_version, PYTHON_RANGE):
        yield diag("QAS602", f"the script needs Python {PYTHON_RANGE}; {where} is Python {env.python_version}",
                   ("search",), hint="point --python at a newer interpreter", at_key=True)
    for package, version_range in requirements(spec).items():
        if package == "plotly":
            at = (*spec.output.path, "plots")
        elif package in IMAGE_REQUIREMENTS:
            at = (*image_readers(spec)[0].path, "images")  # the reader that needs it
        elif package in BLOCK_REQUIREMENTS:
            at = (*spec.keep_float.path, "blocks")
        elif package in TRACKING_REQUIREMENTS:
            at = (*spec.output.path, "mlflow")
        else:
            at = ("search",)
        found = env.packages.get(package)
        command = install_command(python, package, version_range, accelerator)
        if found is None:
            yield diag("QAS601", f"{package} is not installed in {where}; the search script needs it",
                       at, hint=f"install it: {command}", at_key=True)
        elif not _within(found, version_range):
            yield diag("QAS602", f"{package} {found} in {where} is outside the supported range {version_range}",
                       at, hint=f"install a supported version: {command}", at_key=True)
    yield from _gate_device(spec, env, accelerator, where)


def _gate_device(spec: Spec, env: Environment, accelerator: str, where: str) -> Iterator[Diagnostic]:
    at = ("device",)
    if accelerator == "cpu":
        gpu = [p for p in env.providers if p in GPU_PROVIDERS]
        if gpu and spec.evaluation.metric is not None and quark_runs_search(engine(spec)):
            yield diag("QAS605", f"device is cpu, but onnxruntime in {where} has {', '.join(gpu)}: Quark's "
                                 "built-in metric runs its sessions on the GPU provider", at,
                       hint="use a CPU-only onnxruntime for a CPU search, or set device to the GPU")
        return
    if env.packages.get("onnxruntime") is not None and not any(p in env.providers for p in ORT_PROVIDERS[accelerator]):
        yield diag("QAS603", f"device {spec.device} needs onnxruntime's {' or '.join(ORT_PROVIDERS[accelerator])}, "
                             f"but {where} has only {', '.join(env.providers) or 'no providers'}", at,
                   hint=f"install {ORT_DISTRIBUTION[accelerator]} in place of onnxruntime, or set device: cpu")
    if env.packages.get("torch") is not None and env.torch_build != accelerator:
        yield diag("QAS604", f"device {spec.device} needs a {accelerator} build of torch, but {where} has a "
                             f"{env.torch_build} build ({env.packages['torch']})", at,
                   hint=f"install torch from {TORCH_INDEX[accelerator]}, or set device: cpu")
    index = int(spec.device.split(":", 1)[1])
    if env.gpu_count is not None and index >= env.gpu_count:
        yield diag("QAS606", f"device {spec.device} does not exist: the target has {env.gpu_count} GPU(s)", at,
                   hint=f"use an index below {env.gpu_count}")
