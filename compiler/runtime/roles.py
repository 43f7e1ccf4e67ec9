"""What one process of a search is: the script's arguments in; a Role (alone, launcher of N workers, or one worker) out."""

from __future__ import annotations

import os
from dataclasses import dataclass

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


def default_index() -> int:
    """The worker index a cluster gave this task, else 0."""
    for name in INDEX_ENVS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0
