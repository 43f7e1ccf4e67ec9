"""Stopping a search cleanly: SIGINT and SIGTERM in; KeyboardInterrupt in the main thread out (the trial in hand is
then marked interrupted, not failed, and the script exits EXIT_INTERRUPTED so a re-run resumes).

Both handlers are installed even when the process started with SIGINT ignored (nohup, `&` in a
script), so `kill -INT` always stops it. A second signal while stopping kills at once. A process started
by `qas run` or by a launcher of workers ends with its parent (end_with_launcher): a SIGKILLed parent
leaves no orphan holding the study. That stop comes as SIGHUP, handled apart: Linux sends the parent-death
signal once per thread of the dying parent, so it arrives several times and must not count as a second signal.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from . import console, contract
from .console import warn

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrialTimeout(Exception):
    """A trial ran longer than search.trial_timeout: that trial fails, the search goes on."""


_requested: list[str] = []  # the stop signal's name, once one arrived


def requested() -> bool:
    """A stop signal arrived (its KeyboardInterrupt may have been swallowed: Python drops an exception raised
    while it runs a weakref or garbage-collection callback), so the trial loop must not start another trial."""
    return bool(_requested)


def _stop(signum: int, _frame: Any) -> None:
    name = signal.Signals(signum).name
    _requested.append(name)
    for other in STOP_SIGNALS:  # a second signal while stopping ends the process at once
        signal.signal(other, signal.SIG_DFL)
    warn(f"qas: {name} received: stopping after marking the trial in hand interrupted "
         f"(send it again to kill at once)")
    raise KeyboardInterrupt


def install() -> None:
    """Route SIGINT and SIGTERM to a clean stop (KeyboardInterrupt) in the main thread."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_parent(signum: int, parent: int) -> None:
    """Have `signum` sent to this process when `parent` (its parent now) ends: Linux's parent-death signal, elsewhere
    a thread that watches os.getppid(). At once if the parent is already gone."""
    armed = False
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            armed = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if not armed:
        import threading
        import time

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os.kill(os.getpid(), signum)

        threading.Thread(target=watch, name="qas-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # it ended before the signal was asked for
        os.kill(os.getpid(), signum)


PARENT_GONE_SIGNAL = signal.SIGHUP  # the parent-death signal of a script started by `qas run` or a launcher


def end_with_launcher() -> None:
    """Started by `qas run` or a launcher (contract.PARENT_PID_ENV): stop cleanly (the trial in hand marked
    interrupted) when that parent ends, however it ends. The variable is not passed on to this process's own
    children."""
    value = os.environ.pop(contract.PARENT_PID_ENV, "")
    if value.isdigit():
        signal.signal(PARENT_GONE_SIGNAL, lambda _signum, frame: _parent_gone(int(value), frame))
        end_with_parent(PARENT_GONE_SIGNAL, int(value))


def _parent_gone(parent: int, _frame: Any) -> None:
    """The launching process ended: stop as for a stop signal, once; its repeats (one per thread of the dying
    parent) are ignored. The line also goes into search.log: the terminal it was meant for may be gone."""
    if _requested:
        return
    _requested.append("parent ended")
    line = (f"qas: the process that started this search (pid {parent}) ended: stopping after marking the trial "
            "in hand interrupted")
    warn(line)
    console.also_in_log(line)
    raise KeyboardInterrupt


class TrialTimer:
    """A wall-clock limit for one trial (None: no limit): raises TrialTimeout in the main thread when it runs out.

    The limit interrupts Python code (an evaluator) and the wait for the quantizer's child process, which is
    then killed (quantizer_process.py); a call stuck inside native code in this process is interrupted when it
    returns to Python.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    def __enter__(self) -> TrialTimer:
        if self.seconds:
            signal.signal(signal.SIGALRM, self._time_out)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def _time_out(self, _signum: int, _frame: Any) -> None:
        raise TrialTimeout(f"the trial ran past search.trial_timeout ({self.seconds:g} s) and was stopped")

    def __exit__(self, *_exc: Any) -> None:
        if self.seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)
