"""Sample headers without loading data: a .npy/.npz path in, {array name: (dtype, shape)} out."""

from __future__ import annotations

import zipfile
from pathlib import Path

from numpy.lib import format as npy_format

Header = tuple[str, tuple[int, ...]]


def _read_header(handle) -> Header:
    version = npy_format.read_magic(handle)
    if version == (1, 0):
        shape, _fortran, dtype = npy_format.read_array_header_1_0(handle)
    elif version == (2, 0):
        shape, _fortran, dtype = npy_format.read_array_header_2_0(handle)
    else:
        raise ValueError(f".npy format version {version} is not supported; save with numpy.save")
    return dtype.name, tuple(shape)


def sample_files(folder: Path, limit: int | None) -> list[Path]:
    """The files a folder reader will use, in the order it uses them."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and p.is_file())[:limit]


def read_headers(path: Path) -> dict[str | None, Header]:
    """A .npy file maps None (the single input) to its header; a .npz maps each member name. Raises ValueError."""
    try:
        if path.suffix == ".npy":
            with open(path, "rb") as handle:
                return {None: _read_header(handle)}
        headers: dict[str | None, Header] = {}
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if member.endswith(".npy"):
                    with archive.open(member) as handle:
                        headers[member[:-4]] = _read_header(handle)
        return headers
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(str(exc) or exc.__class__.__name__) from exc
