"""Stopping a search cleanly: SIGINT and SIGTERM in; KeyboardInterrupt in the main thread out (the trial in hand is
then marked interrupted, not failed, and the script exits EXIT_INTERRUPTED so a re-run resumes).

Both handlers are installed even when the process started with SIGINT ignored (nohup, `&` in a
script), so `kill -INT` always stops it. A second signal while stopping kills at once.
"""

from __future__ import annotations

import signal
from typing import Any

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


class TrialTimer:
    """A wall-clock limit for one trial (None: no limit): raises TrialTimeout in the main thread when it runs out.

    The limit interrupts Python code (an evaluator, Quark's loops); a call stuck inside native code
    is interrupted when it returns to Python.
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
