"""Output folders before anything is written: a folder (and the subfolders compile writes) in; why files could not
be written there, or None, out. The resolve pass and emit share it, so `qas validate` and compile say the same."""

from __future__ import annotations

import os
from pathlib import Path


def folder_hint(key: str) -> str:
    """An output section key naming a folder in; the hint of an error saying it cannot be written out."""
    return f"choose another output.{key}, or move what is in the way"


OUTPUT_HINT = folder_hint("dir")


def folder_problem(folder: Path, subfolders: tuple[str, ...] = (), base: Path | None = None) -> str | None:
    """Why files could not be written into `folder` (created if need be), or None; reads the disk, writes nothing.

    Compile refuses with this before writing, and `qas validate` reports it, so both say the same.
    Paths under `base` are shown relative to it.
    """
    def shown(path: Path) -> str:
        return os.path.relpath(path, base) if base is not None and base in path.parents else str(path)

    try:
        if folder.exists():
            if not folder.is_dir():
                return f"{shown(folder)} is a file, not a folder"
            for sub in subfolders:
                if (folder / sub).exists() and not (folder / sub).is_dir():
                    return f"{shown(folder / sub)} is a file, but compile writes a folder there"
            return None if os.access(folder, os.W_OK | os.X_OK) else f"{shown(folder)} is not writable"
        for parent in folder.parents:
            if parent.exists():
                if not parent.is_dir():
                    return f"{shown(parent)} is a file, so {shown(folder)} cannot be created"
                if not os.access(parent, os.W_OK | os.X_OK):
                    return f"{shown(parent)} is not writable, so {shown(folder)} cannot be created"
                return None
    except OSError as exc:  # e.g. a name too long for the file system
        return f"{shown(folder)} cannot be used: {exc.strerror or exc}"
    return None
