"""The sensitivity cache: what the measurement depends on in; a key, the cached sensitivity.json when its key matches,
and a lock for the measurement that leaves no file behind, out."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FORMAT = 2  # 2: per-sample drops, candidates mapped to float nodes, robust scores with a noise estimate


def data_hash(*sample_lists: list[dict[str, Any]]) -> str:
    """The samples' bytes (inputs in name order) in; a sha256 out."""
    digest = hashlib.sha256()
    for samples in sample_lists:
        for sample in samples:
            for key in sorted(sample):
                digest.update(key.encode())
                digest.update(str(sample[key].dtype).encode() + str(sample[key].shape).encode())
                digest.update(sample[key].tobytes())
    return digest.hexdigest()


def cache_key(model_sha256: dict[str, str], base: dict[str, Any], data: str, method: str, samples: int,
              fixed: list[Any]) -> str:
    """What the per-sample drops depend on: the model, the base configuration, the data and the method."""
    value = {"format": FORMAT, "model": model_sha256, "base": base, "data": data, "method": method,
             "samples": samples, "fixed_exclusions": fixed}
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def load_cached(path: Path, key: str) -> dict[str, Any] | None:
    """sensitivity.json when it holds a measurement with this key, else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key and data.get("format") == FORMAT else None


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """An fcntl lock on `path` while the block runs (other workers wait, then read the result); the file is removed
    on the way out, success or failure, so no lock file stays behind. A waiter that wakes on a removed file takes
    the lock again on the new one."""
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - closed below
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()
