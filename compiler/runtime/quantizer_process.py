"""Quantizing in a child process: jobs (a Quark config, the nodes kept in float, an output path) in; the models
written by one long-lived child out, so a stop signal, search.trial_timeout or a crash (segfault, out of memory)
ends the child, never the search.

The child is started once per search with multiprocessing's "spawn" context (Quark imported there once, not per
trial) and is given a factory and its arguments (the settings: paths, never the model itself), which build its
quantizer. It shares the parent's stdout and stderr (search.log unless --verbose) and working directory (Quark
appends quantized_info.csv there), keeps its temporary files in a folder of its own that the parent removes,
ignores SIGINT (a terminal's Ctrl-C reaches the whole process group: the parent decides) and dies with its
parent. The parent waits for each answer interruptibly: a KeyboardInterrupt or TrialTimeout while it waits
kills the child at once and is raised on; the next job starts a fresh child.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import stopping

Quantize = Callable[[dict[str, Any], Path, list[Any]], Any]  # (config, output, exclusions): writes the model
CLOSE_SECONDS = 10.0  # how long a child asked to end (no job in hand) gets before it is killed


class QuantizerDied(Exception):
    """The child ended without answering: killed by a signal (a crash, the out-of-memory killer) or exited."""


class QuantizerProcess:
    """A callable like QuarkQuantizer.quantize whose work runs in a child process started by `factory(*args)`."""

    def __init__(self, factory: Callable[..., Quantize], *args: Any) -> None:
        self.factory, self.args = factory, args
        self._process: Any = None
        self._connection: Any = None
        self._temp: str | None = None
        self._at_exit = False

    def start(self) -> None:
        """Start the child now (it imports and builds its quantizer while the parent goes on)."""
        import atexit
        import multiprocessing

        if self._process is not None:
            return
        context = multiprocessing.get_context("spawn")
        self._connection, theirs = context.Pipe()
        self._temp = tempfile.mkdtemp(prefix="qas-quantizer-")
        self._process = context.Process(target=serve, name="qas-quantizer",
                                        args=(theirs, os.getpid(), self._temp, self.factory, self.args))
        self._process.start()
        theirs.close()
        if not self._at_exit:  # runs before multiprocessing's own exit handler, which would wait for the child
            atexit.register(self.close)
            self._at_exit = True

    def __call__(self, config: dict[str, Any], output: Path, exclusions: list[Any]) -> Any:
        """Quantize in the child; what the child's quantizer returned (the steps) out, its error raised here (the
        same exception when it pickles), a kill as QuantizerDied."""
        self.start()
        try:
            self._connection.send((config, str(output), exclusions))
            reply = self._wait()
        except BaseException:  # a stop signal or the trial's time limit: the child is stopped, whatever it does
            self.kill()
            raise
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _wait(self) -> Any:
        from multiprocessing.connection import wait

        # The wait is a select(): a signal handler runs during it, and its exception (KeyboardInterrupt,
        # TrialTimeout) ends the wait at once
        ready = wait([self._connection, self._process.sentinel])
        if self._connection in ready:
            try:
                return self._connection.recv()
            except EOFError:
                pass  # it died as it answered
        self._process.join()
        code = self._process.exitcode
        self.kill()
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited ({code})"
        hint = " (SIGKILL: often the out-of-memory killer; SIGSEGV or SIGABRT: a crash in native code)" if (
            code is not None and code < 0) else ""
        return QuantizerDied(f"the quantizer process {how} during this trial{hint}; a fresh one quantizes the next")

    def kill(self) -> None:
        """End the child at once (SIGKILL) and remove its temporary files; the next job starts a fresh one."""
        process, self._process = self._process, None
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join()
            self._connection.close()
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    def close(self) -> None:
        """Ask the child to end (it holds no job), killing it if it does not within CLOSE_SECONDS."""
        if self._process is not None and self._process.is_alive():
            try:
                self._connection.send(None)
                self._process.join(CLOSE_SECONDS)
            except OSError:
                pass
        self.kill()


def serve(connection: Any, parent: int, temp: str, factory: Callable[..., Quantize], args: tuple[Any, ...]) -> None:
    """The child's loop: build the quantizer once, then answer each job with what it returned or the exception."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopping.end_with_parent(signal.SIGKILL, parent)  # nothing to save: the parent marks the trial
    os.environ["TMPDIR"] = tempfile.tempdir = temp  # Quark's and onnxruntime's temp files, removed with the child
    try:
        quantize: Quantize | None = factory(*args)
        broken: BaseException | None = None
    except Exception as error:  # noqa: BLE001 - every job answered with it, so the trials say why
        traceback.print_exc()
        quantize, broken = None, portable(error)
    while True:
        try:
            job = connection.recv()
        except EOFError:
            return
        if job is None:
            return
        config, output, exclusions = job
        try:
            if quantize is None:
                raise broken  # type: ignore[misc]
            connection.send(quantize(config, Path(output), exclusions))
        except Exception as error:  # noqa: BLE001 - the trial's failure, told to the parent
            traceback.print_exc()  # into search.log (or the terminal with --verbose), with file:line
            connection.send(portable(error))


def portable(error: BaseException) -> BaseException:
    """An exception that survives the pipe: itself when it pickles, else a RuntimeError with its type and message."""
    try:
        return pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - a library's exception with an odd constructor
        return RuntimeError(f"{type(error).__name__}: {error}")
