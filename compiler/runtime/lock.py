"""One search per study: an output folder's study file in; an OS lock held for the life of the process out.

The lock is fcntl's advisory lock on `<study file>.lock`, so the OS releases it when the owner dies,
however it dies (SIGKILL included): a held lock means a live owner, a free one means none. The file
also says who holds it, for the message a second run gets.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

from .checks import fail


def lock_path(study_path: Path) -> Path:
    return study_path.with_name(study_path.name + ".lock")


def holder(study_path: Path) -> str | None:
    """Who holds the study's lock now ("pid N on HOST, since TIME"), or None when no live process does."""
    path = lock_path(study_path)
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return handle.read().strip() or "a process that did not say which"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


def acquire(study_path: Path) -> IO[str]:
    """Lock the study for this process, or stop with a message naming the process that holds it.

    The returned handle must stay open (and referenced) while the search runs.
    """
    path = lock_path(study_path)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open on purpose: closing releases the lock
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "a process that did not say which"
        handle.close()
        fail(f"another search is running on {study_path.name}: {owner}; wait for it to end or stop it "
             f"(the lock is {path}, released by the OS when that process ends)")
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n")
    handle.flush()
    return handle
