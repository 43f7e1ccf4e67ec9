"""Cluster launch files: a checked Spec, the output folder (relative to the spec's folder) and the script's name in;
render-ready settings of `<name>_k8s_job.yaml` and `<name>_slurm.sh` out (decided here, printed by the templates).

Each worker runs `python3 <script> --worker --worker-index K`, K from the Job's completion index or the array task
id, with the storage URL in the environment variable storage.url_env names.
"""

from __future__ import annotations

import posixpath
from typing import Any

from compiler.check.resolved import device_index
from compiler.durations import seconds
from compiler.front.model import KubernetesSpec, SlurmSpec, Spec
from compiler.runtime.contract import EXIT_USAGE

GPU_RESOURCES = {"cuda": "nvidia.com/gpu", "rocm": "amd.com/gpu"}
SECRET_KEY = "url"  # the key of the storage URL in the Kubernetes Secret
INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
NAME_LIMIT = 63  # a Kubernetes label value, and the Job's name (its pods' hostnames carry it)


# Folders of the image a claim mounted at workdir would hide (the root, the system's and its programs' folders) ...
SYSTEM_FOLDERS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
                            "/opt", "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var", "/usr/bin",
                            "/usr/include", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/local",
                            "/usr/sbin", "/usr/share", "/usr/local/bin", "/usr/local/lib", "/usr/local/lib64",
                            "/usr/local/sbin", "/usr/local/share", "/var/cache", "/var/lib", "/var/log", "/var/run",
                            "/opt/conda"})
# ... and the folders no workspace belongs in at any depth (the kernel's, the system's configuration and programs).
SYSTEM_TREES = ("/bin/", "/boot/", "/dev/", "/etc/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/proc/", "/run/",
                "/sbin/", "/sys/")


def pod_path(workdir: str, relative: str = ".") -> str:
    """workdir as written (absolute) and a path relative to it in; the normalized absolute path in the pod out. The one
    path function of the Job: its mountPath and its workingDir both come from here."""
    joined = posixpath.normpath(posixpath.join(workdir, relative))
    return "/" + joined.lstrip("/")  # normpath keeps a leading "//"


def system_folder(path: str) -> bool:
    """A normalized pod path in; True when it is the root or a folder of the image's system (SYSTEM_FOLDERS / TREES)."""
    return path in SYSTEM_FOLDERS or path.startswith(SYSTEM_TREES)


def k8s_file(name: str) -> str:
    return f"{name}_k8s_job.yaml"


def slurm_file(name: str) -> str:
    return f"{name}_slurm.sh"


def job_name(name: str) -> str:
    """The spec's name in; a DNS-1123 label for the Job (and the SLURM job name) out."""
    return ("qas-" + name.lower().replace("_", "-"))[:NAME_LIMIT].rstrip("-")


def _gpus(spec: Spec, target: KubernetesSpec | SlurmSpec) -> int:
    """GPUs each worker holds: the option, else the device index plus one; 0 for device cpu."""
    index = device_index(spec.device)
    if index is None:
        return 0
    return target.gpus if target.gpus is not None else index + 1


def slurm_time(total: float) -> str:
    """Seconds in; SLURM's D-HH:MM:SS out."""
    rest = int(total)
    days, rest = divmod(rest, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def _kubernetes(spec: Spec, k: KubernetesSpec, output_dir: str, script: str) -> dict[str, Any]:
    gpus = _gpus(spec, k)
    workers = k.workers if k.workers is not None else spec.search.workers
    return {
        "file": k8s_file(spec.name),
        "job_name": job_name(spec.name),
        "search": spec.name,
        "namespace": k.namespace,
        "image": k.image,
        "workers": workers,
        "retries": k.retries,
        "exit_usage": EXIT_USAGE,
        "gpus": gpus,
        "gpu_resource": GPU_RESOURCES[spec.device.split(":")[0]] if gpus else None,
        "secret": k.secret,
        "secret_key": SECRET_KEY,
        "url_env": spec.storage.url_env,
        "index_field": INDEX_ANNOTATION,
        "workdir": pod_path(k.workdir),
        "volume_claim": k.volume_claim,
        "working_dir": pod_path(k.workdir, output_dir),
        "command": [k.python, script, "--worker", "--worker-index", "$(JOB_COMPLETION_INDEX)"],
    }


def _slurm(spec: Spec, s: SlurmSpec, script: str) -> dict[str, Any]:
    gpus = _gpus(spec, s)
    workers = s.workers if s.workers is not None else spec.search.workers
    return {
        "file": slurm_file(spec.name),
        "job_name": job_name(spec.name),
        "workers": workers,
        "array": f"0-{workers - 1}",
        "partition": s.partition,
        "account": s.account,
        "gres": (f"gpu:{s.gpu_type}:{gpus}" if s.gpu_type else f"gpu:{gpus}") if gpus else None,
        "cpus_per_task": s.cpus_per_task,
        "time": slurm_time(seconds(s.time)) if s.time is not None else None,
        "python": s.python,
        "script": script,
        "url_env": spec.storage.url_env,
        "exit_usage": EXIT_USAGE,
        "log": f"{spec.name}_slurm_%A_%a.log",
    }


def launch_plan(spec: Spec, output_dir: str, script: str) -> dict[str, dict[str, Any]]:
    """The launch files the spec asks for, keyed kubernetes / slurm, each with its file name and every value it
    prints."""
    out: dict[str, dict[str, Any]] = {}
    if spec.output.launch.kubernetes is not None:
        out["kubernetes"] = _kubernetes(spec, spec.output.launch.kubernetes, output_dir, script)
    if spec.output.launch.slurm is not None:
        out["slurm"] = _slurm(spec, spec.output.launch.slurm, script)
    return out
