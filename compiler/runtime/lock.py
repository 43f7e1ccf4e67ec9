"""One search per study: an output folder's study file in; an OS lock held for the life of the process out.

The lock is fcntl's advisory lock on `<study file>.lock`, so the OS releases it when the owner dies,
however it dies (SIGKILL included): a held lock means a live owner, a free one means none. The file
also says who holds it, for the message a second run gets.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
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


class FileLock:
    """A blocking fcntl lock on `path` for a short critical section (`with FileLock(p):`); the OS releases it
    when the holder dies, so a SIGKILLed worker never leaves it held. Also Optuna's journal-file lock
    (acquire/release), in place of its lock files that a killed writer leaves behind for 30 s."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._handle: IO[str] | None = None

    def acquire(self) -> bool:
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - closed by release()
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


# --- Worker liveness on this machine -----------------------------------------------------------------
# Each worker holds an exclusive lock on <temp dir>/qas-workers/<host>-<pid>.lock while it lives (one folder
# per machine, whatever output folder the worker runs from); a RUNNING trial whose worker (ATTR_WORKER
# "<index>@<host>:<pid>") is on this host and holds no lock is a dead worker's, at once and for sure.
# Workers on other hosts are judged by the storage's heartbeats instead.

def _workers_dir() -> Path:
    return Path(tempfile.gettempdir()) / "qas-workers"


def worker_name(index: int) -> str:
    """This process as a trial's worker attribute: "<index>@<host>:<pid>"."""
    return f"{index}@{socket.gethostname()}:{os.getpid()}"


_worker_lock: list[IO[str]] = []  # this process's worker lock, once taken


def hold_worker_lock() -> None:
    """Mark this process alive as a worker until it ends (once per process; released by the OS at its end)."""
    if _worker_lock:
        return
    folder = _workers_dir()
    folder.mkdir(mode=0o1777, exist_ok=True)
    handle = open(folder / f"{socket.gethostname()}-{os.getpid()}.lock", "w", encoding="utf-8")  # noqa: SIM115
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live pid is unique on this host
    _worker_lock.append(handle)


def worker_is_dead(worker: str) -> bool | None:
    """True when `worker` ran on this host and is gone, False when it lives, None when it ran on another host."""
    try:
        host, pid = worker.split("@", 1)[1].rsplit(":", 1)
    except (IndexError, ValueError):
        return None
    if host != socket.gethostname():
        return None
    path = _workers_dir() / f"{host}-{pid}.lock"
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return True
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    path.unlink(missing_ok=True)  # its owner is gone: tidy up
    return True


def release_worker_lock() -> None:
    """A worker's clean end: its lock file removed, then released."""
    while _worker_lock:
        handle = _worker_lock.pop()
        Path(handle.name).unlink(missing_ok=True)
        handle.close()
