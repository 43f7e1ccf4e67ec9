"""Several workers on this machine: the script's path and a worker count in; N worker processes of the script run to
the end of the budget, and one exit code for them all, out.

Each worker is `python <script> --worker --worker-index K --spawned` in its own process group, so a
terminal's Ctrl-C reaches the launcher only, and the launcher passes it on exactly once (a second
one kills them at once); a launcher that dies (SIGKILL) takes its workers with it, each stopping as on
SIGTERM. The machine's cores are split between the workers (an affinity mask and
the thread counts of OpenMP, MKL, torch and onnxruntime), so N workers on N cores do not oversubscribe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import contract
from .console import say, terminal, warn

CPUS_ENV = "QAS_CPUS"  # the cores a spawned worker may use, "0,1"; set by the launcher only
THREAD_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def cpu_shares(workers: int, cpus: list[int] | None = None) -> list[list[int]]:
    """The cores this process may use, split into `workers` disjoint shares as even as can be (shared round-robin
    when there are more workers than cores)."""
    cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
    if workers >= len(cpus):
        return [[cpus[k % len(cpus)]] for k in range(workers)]
    size, extra = divmod(len(cpus), workers)
    shares, start = [], 0
    for k in range(workers):
        end = start + size + (1 if k < extra else 0)
        shares.append(cpus[start:end])
        start = end
    return shares


def share_env(cpus: list[int]) -> dict[str, str]:
    """The environment a worker on `cpus` starts with (read by OpenMP, MKL and torch at import)."""
    return {CPUS_ENV: ",".join(map(str, cpus)), **{name: str(len(cpus)) for name in THREAD_ENVS}}


def apply_share() -> int | None:
    """In a spawned worker: keep to the launcher's cores (affinity), and the thread count out (None: not spawned)."""
    value = os.environ.get(CPUS_ENV)
    if not value:
        return None
    cpus = {int(c) for c in value.split(",")}
    os.sched_setaffinity(0, cpus)
    return len(cpus)


def run_workers(script: Path, workers: int, verbose: bool) -> int:
    """Start `workers` workers of the script, wait for all, and their combined exit code out."""
    shares = cpu_shares(workers)
    out, err = terminal()  # this process's fds 1 and 2 may be search.log by now; the workers route their own
    children: list[subprocess.Popen] = []
    signals: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: signals.append(signum)) for s in (signal.SIGINT,
                                                                                          signal.SIGTERM)}
    try:
        for index, cpus in enumerate(shares):
            argv = [sys.executable, str(script), "--worker", "--worker-index", str(index), "--spawned"]
            children.append(subprocess.Popen(argv + (["--verbose"] if verbose else []),
                                             env=os.environ | share_env(cpus) | {
                                                 contract.PARENT_PID_ENV: str(os.getpid())}, process_group=0,
                                             stdout=out, stderr=err))
        say(f"qas: {workers} workers started (pids {', '.join(str(c.pid) for c in children)}), "
            f"cores {' | '.join(','.join(map(str, s)) for s in shares)}")
        passed_on = 0
        while any(c.poll() is None for c in children):
            if len(signals) > passed_on:  # each stop signal passed on once: the first stops, a second kills
                passed_on = len(signals)
                for child in children:
                    if child.poll() is None:
                        child.send_signal(signal.SIGINT)
            time.sleep(0.2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return combined_exit(children, stopped=bool(signals))


def combined_exit(children: list[subprocess.Popen], stopped: bool) -> int:
    """The workers' exit codes in; one code out: interrupted, failed (naming each failed worker) or ok."""
    codes = [c.returncode for c in children]
    failed = [(k, code) for k, code in enumerate(codes) if code not in (contract.EXIT_OK, contract.EXIT_INTERRUPTED)]
    for index, code in failed:
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        warn(f"qas: worker {index} ended with {how}; see {contract.SEARCH_LOG_FILE}")
    if stopped or contract.EXIT_INTERRUPTED in codes:
        return contract.EXIT_INTERRUPTED
    return contract.EXIT_FAILED if failed else contract.EXIT_OK
