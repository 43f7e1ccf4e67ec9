"""Sample headers without loading data: a .npy/.npz path in, {array name: (dtype, shape)} out.

The data is never read, but its length must be what the header declares (a truncated file fails here,
not hours into a search); for an .npz member that is the zip's record of its uncompressed size.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path

from numpy.lib import format as npy_format

Header = tuple[str, tuple[int, ...]]


def _read_header(handle, size: int) -> Header:
    """The header of an .npy stream of `size` bytes; ValueError unless the data after it is exactly what it declares."""
    version = npy_format.read_magic(handle)
    if version == (1, 0):
        shape, _fortran, dtype = npy_format.read_array_header_1_0(handle)
    elif version == (2, 0):
        shape, _fortran, dtype = npy_format.read_array_header_2_0(handle)
    else:
        raise ValueError(f".npy format version {version} is not supported; save with numpy.save")
    if not dtype.hasobject:  # pickled object arrays have no fixed size (and fit no model input)
        declared = math.prod(shape) * dtype.itemsize
        held = size - handle.tell()
        if held < declared:
            raise ValueError(f"truncated: its header declares {dtype.name} {list(shape)} ({declared} bytes of data), "
                             f"but only {held} bytes follow the header")
        if held > declared:
            raise ValueError(f"{held - declared} bytes follow the {declared} bytes of data its header declares "
                             f"({dtype.name} {list(shape)}); save it again with numpy.save")
    return dtype.name, tuple(shape)


def sample_files(folder: Path, limit: int | None) -> list[Path]:
    """The files a folder reader will use, in the order it uses them."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and p.is_file())[:limit]


def read_headers(path: Path) -> dict[str | None, Header]:
    """A .npy file maps None (the single input) to its header; a .npz maps each member name. Raises ValueError."""
    try:
        if path.suffix == ".npy":
            with open(path, "rb") as handle:
                return {None: _read_header(handle, os.fstat(handle.fileno()).st_size)}
        headers: dict[str | None, Header] = {}
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                if member.filename.endswith(".npy"):
                    with archive.open(member) as handle:  # file_size: the member's uncompressed size
                        try:
                            headers[member.filename[:-4]] = _read_header(handle, member.file_size)
                        except ValueError as exc:
                            raise ValueError(f"member {member.filename!r}: {exc}") from exc
        return headers
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(str(exc) or exc.__class__.__name__) from exc
