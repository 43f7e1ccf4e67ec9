"""Parallel-search pass: Spec in; diagnostics out for search.workers, storage and output.launch.

QAS326: the engine cannot run workers or keep its study elsewhere (AutoSearchPro: Quark's n_jobs > 1
crashes, F2, and its study is SQLite in the output folder); QAS331: a grace period not longer than the
heartbeat; QAS334: storage.url_env names a variable the system or a launcher owns; QAS332: launch files
without a shared storage; QAS333: a launch option that does not fit the device; QAS302: a relative
artifacts folder outside the spec's folder, or an output folder outside it with kubernetes launch files;
QAS335: a kubernetes workdir that is the root or a system folder; QAS202: kubernetes without an image.
The database URL itself never reaches here (the schema stage refuses it, QAS330).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from compiler.check.cluster import pod_path, system_folder
from compiler.check.engine_support import HINT, refusals
from compiler.check.env_names import owner
from compiler.check.resolved import device_index, engine, heartbeat_and_grace, spec_path
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import KubernetesSpec, SlurmSpec, Spec
from compiler.runtime.contract import ENGINES, Engine

URL_HINT = ("add storage: {url_env: QAS_STORAGE_URL} (a PostgreSQL database every worker reaches, its URL in that "
            "environment variable); the default journal file serves workers on one machine only")


def check(spec: Spec) -> Iterator[Diagnostic]:
    unsupported = list(_unsupported(spec, engine(spec)))
    yield from unsupported
    if unsupported:
        return
    if spec.storage is not None and spec.storage.kind == "url":
        yield from _url_storage(spec)
    yield from _tracking(spec)
    launch = spec.output.launch
    if launch.empty:
        return
    if spec.storage is None or spec.storage.kind != "url":
        yield diag("QAS332", "output.launch starts workers on several machines, which need a shared storage: "
                             "storage.url_env is not set", launch.path, hint=URL_HINT, at_key=True)
    for target in (launch.kubernetes, launch.slurm):
        if target is not None:
            yield from _target(spec, target)


def _unsupported(spec: Spec, record: Engine) -> Iterator[Diagnostic]:
    search, evaluation, output = spec.search, spec.evaluation, spec.output
    if spec.storage is not None and spec.storage.kind not in record.storages:  # a kind of store, not a feature
        needs = " or ".join(n for n, r in ENGINES.items() if spec.storage.kind in r.storages)
        yield diag("QAS326", f"storage needs engine {needs}: Quark's AutoSearchPro keeps its study in SQLite in the "
                             "output folder", spec.storage.path, hint=HINT, at_key=True)
    yield from refusals(spec, (
        (search.workers > 1, "workers", "workers > 1", (*search.path, "workers")),
        (search.objectives is not None, "objectives", "search.objectives", (*search.path, "objectives")),
        (evaluation.tolerance is not None, "objectives", "evaluation.tolerance", (*evaluation.path, "tolerance")),
        (search.stop is not None, "stop_rules", "search.stop", (*search.path, "stop")),
        (output.mlflow is not None, "tracking", "output.mlflow", (*output.path, "mlflow")),
        (not output.launch.empty, "launch", "output.launch", output.launch.path)))


def _tracking(spec: Spec) -> Iterator[Diagnostic]:
    """QAS337: output.mlflow.tracking_uri_env names a variable others own (MLflow's own MLFLOW_TRACKING_URI is fine:
    MLflow reads it for this very purpose)."""
    name = (spec.output.mlflow or {}).get("tracking_uri_env")
    taken = owner(name) if name and name.upper() != "MLFLOW_TRACKING_URI" else None
    if taken is not None:
        yield diag("QAS337", f"output.mlflow.tracking_uri_env {name!r} is a variable {taken} sets or reads: every "
                             "program in the worker would see the tracking URI (and any password in it), or "
                             "overwrite it",
                   (*spec.output.path, "mlflow", "tracking_uri_env"),
                   hint="name a variable of your own, e.g. tracking_uri_env: QAS_MLFLOW_URI")


def _url_storage(spec: Spec) -> Iterator[Diagnostic]:
    s = spec.storage
    taken = owner(s.url_env)
    if taken is not None:
        yield diag("QAS334", f"storage.url_env {s.url_env!r} is a variable {taken} sets or reads: every program in the "
                             "worker would see the database URL in it (and print it in its messages), or overwrite it",
                   (*s.path, "url_env"), hint="name a variable of your own, e.g. url_env: QAS_STORAGE_URL")
    heartbeat, grace = heartbeat_and_grace(spec)
    if grace <= heartbeat:
        at = (*s.path, "grace_period") if s.grace_period is not None else (*s.path, "heartbeat")
        yield diag("QAS331", f"storage.grace_period ({grace:g}s) must be longer than storage.heartbeat "
                             f"({heartbeat:g}s): a worker that is alive would lose its trial between two heartbeats",
                   at, hint=f"make grace_period several heartbeats long, e.g. {int(heartbeat) * 6}s")
    if s.artifacts is not None and not os.path.isabs(s.artifacts) and not spec.output.allow_outside_workspace:
        root = spec.workspace.resolve()
        target = Path(os.path.abspath(spec_path(spec, s.artifacts)))
        if target != root and root not in target.parents:
            yield diag("QAS302", f"storage.artifacts {s.artifacts!r} leaves the spec's folder", (*s.path, "artifacts"),
                       hint="write the shared folder as an absolute path, keep it beside the spec, or set "
                            "output.allow_outside_workspace: true")


def _target(spec: Spec, target: KubernetesSpec | SlurmSpec) -> Iterator[Diagnostic]:
    if isinstance(target, KubernetesSpec):
        if target.image is None:
            yield diag("QAS202", "output.launch kubernetes needs an image", target.path, hint="write output.launch: "
                       "{kubernetes: {image: <an image with Python and the script's packages>}}")
        yield from _pod_folders(spec, target)
    if target.gpus is None:
        return
    at = (*target.path, "gpus")
    index = device_index(spec.device)
    if index is None:
        yield diag("QAS333", f"gpus is set, but the device is {spec.device}: the workers would hold GPUs they "
                             "never use", at, hint="remove gpus, or set device to cuda:0 or rocm:0")
    elif target.gpus <= index:
        yield diag("QAS333", f"device {spec.device} needs at least {index + 1} GPUs per worker, gpus is {target.gpus}",
                   at, hint=f"set gpus to {index + 1}, or use device {spec.device.split(':')[0]}:0 (each worker "
                            "counts its own GPUs from 0)")


def _pod_folders(spec: Spec, k: KubernetesSpec) -> Iterator[Diagnostic]:
    """workdir is a folder of its own (not the root nor one of the image's), and the output folder is inside the spec's
    folder, the only one the pods have (at workdir): the Job's workingDir must be a folder they can see."""
    mount = pod_path(k.workdir)
    if system_folder(mount):
        what = "the pod's root" if mount == "/" else f"the image's system folder {mount}"
        written = f" ({k.workdir!r} as written)" if mount != k.workdir else ""
        harm = "mounted there would hide the image beneath it" if k.volume_claim else "cannot live there"
        yield diag("QAS335", f"kubernetes workdir is {what}{written}: the spec's folder {harm}",
                   (*k.path, "workdir"), hint="give the spec's folder a folder of its own, e.g. workdir: /workspace")
    out = os.path.relpath(spec_path(spec, spec.output.dir), spec.workspace).replace(os.sep, "/")
    if out == ".." or out.startswith("../") or os.path.isabs(out):
        yield diag("QAS302", f"output.dir {spec.output.dir!r} is outside the spec's folder, the only folder the "
                             f"kubernetes pods have (at {mount}): the workers would not find the script there",
                   (*spec.output.path, "dir"), hint="keep output.dir inside the spec's folder for kubernetes launch "
                                                     "files, e.g. autosearch_output")
