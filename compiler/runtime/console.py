"""Where the search's lines go: a line in; qas's own lines to the terminal, library output (Quark, onnxruntime,
torch, tqdm) to search.log in the output folder out, unless the script runs with --verbose.

Routing works on file descriptors, so it also catches native code and loggers that captured
sys.stderr at import time: fds 1 and 2 are pointed at the log, and qas keeps duplicates of the
original ones for its own lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TextIO

_terminal: dict[str, TextIO] = {}  # "out"/"err" -> the original stdout/stderr, once output is routed
_tag: list[str] = []  # "worker K" in a worker of several: its lines say which worker they come from


def set_tag(tag: str) -> None:
    """From now on, qas's lines read "qas [TAG]: ..." (a worker among several)."""
    _tag[:] = [tag]


def _tagged(line: str) -> str:
    return f"qas [{_tag[0]}]:{line[4:]}" if _tag and line.startswith("qas:") else line


def say(line: str) -> None:
    """A progress line of qas's own, on the terminal's stdout."""
    _emit(line, "out", sys.stdout)


def warn(line: str) -> None:
    """A warning or error line of qas's own, on the terminal's stderr."""
    _emit(line, "err", sys.stderr)


def _emit(line: str, which: str, default: TextIO) -> None:
    try:
        print(_tagged(line), file=_terminal.get(which, default), flush=True)
    except OSError:  # the terminal is gone (`qas run` killed, the ssh session dropped): go on, into the log only
        _terminal_lost()
        print(_tagged(line), file=_terminal[which], flush=True)


def _terminal_lost() -> None:
    """qas's own lines go on into search.log (fd 2 once output is routed); without a log (--verbose), fds 1 and 2
    are pointed at /dev/null, so no later write, ours or a library's, fails."""
    if not _terminal:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    log = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    lost = [_terminal.get("out"), _terminal.get("err")]
    _terminal["out"] = _terminal["err"] = log
    for stream in lost:
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def also_in_log(line: str) -> None:
    """`line` (already said or warned) into search.log as well, when library output goes there and qas's own lines
    do not yet: a line the log must hold whatever became of the terminal."""
    if _terminal and _terminal.get("err") is not _terminal.get("out"):  # routed, and the terminal not lost
        os.write(2, (_tagged(line) + "\n").encode("utf-8", "replace"))


def terminal() -> tuple[TextIO, TextIO]:
    """qas's own stdout and stderr (the terminal's, also once library output goes to the log), for child workers."""
    return _terminal.get("out", sys.stdout), _terminal.get("err", sys.stderr)


def route_library_output(log_path: Path) -> None:
    """From now on, everything but say()/warn() lines is appended to `log_path`."""
    if _terminal:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    _terminal["out"] = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
    _terminal["err"] = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.write(log, f"==== qas search, pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S %z')} ====\n".encode())
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
