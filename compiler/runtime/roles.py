"""What one process of a search is: the script's arguments in; a Role (alone, launcher of N workers, or one worker)
out."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from . import contract

# Where a cluster tells an array job's task its index (Kubernetes Indexed Job, SLURM array)
INDEX_ENVS = ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID")


@dataclass(frozen=True)
class Role:
    """workers: processes to start on this machine (1: run in this process); worker: this process joins a study
    another process started (no run lock, an existing study is expected); index: its seed offset; spawned:
    started by a launcher on this machine, which writes the winner once all its workers end."""

    workers: int = 1
    worker: bool = False
    index: int = 0
    spawned: bool = False
    verbose: bool = False
    sensitivity_only: bool = False  # --sensitivity: rank the nodes (sensitivity.json) and stop before the search
    export: Any = None  # --export N / --export-pareto: an export.ExportRequest (rebuild recorded trials, no search)


def default_index() -> tuple[int, str | None]:
    """The worker index a cluster gave this task and the variable it came from, else (0, None). The value is
    never shown: a misnamed storage.url_env could put a database URL in one of these variables."""
    for name in INDEX_ENVS:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value), name
    return 0, None


def index_problem(index: int, source: str | None) -> str | None:
    """A worker index (and the variable it came from; None: --worker-index) in; why it is refused, or None. The
    spec's bound (search.workers and output.launch.*.workers: 1 to MAX_WORKERS) applies here too, so the seed
    (seed + WORKER_SEED_STRIDE * index) stays within what the samplers take."""
    if 0 <= index < contract.MAX_WORKERS:
        return None
    where = "--worker-index" if source is None else f"the worker index in ${source}"
    return f"{where} must be 0 to {contract.MAX_WORKERS - 1} (at most {contract.MAX_WORKERS} workers)"


def workers_problem(workers: int) -> str | None:
    """A --workers value in; why it is refused (the spec's search.workers bound), or None."""
    if 1 <= workers <= contract.MAX_WORKERS:
        return None
    return f"--workers must be 1 to {contract.MAX_WORKERS} (search.workers' bound)"
