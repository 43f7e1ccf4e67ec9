"""The script's entry point: settings in; the checks, the engine's search, and the process exit code out."""

from __future__ import annotations

import importlib
import sys

from . import contract, lock, stopping
from .checks import check_device, check_packages
from .settings import Settings


def main(settings: Settings) -> int:
    """Check packages and the device (exit EXIT_USAGE before any work), lock the study, then run the engine.

    SIGINT and SIGTERM stop the search cleanly from here on (exit EXIT_INTERRUPTED).
    """
    stopping.install()
    check_packages(settings.requirements)
    check_device(settings.device)
    held = lock.acquire(settings.path(settings.study_db))
    try:
        engine = importlib.import_module(f".{contract.ENGINES[settings.engine].entry}", __package__)
        return engine.main(settings)
    except KeyboardInterrupt:  # stopped before or after the trial loop (the loop handles its own)
        print("qas: interrupted; re-run to resume", file=sys.stderr)
        return contract.EXIT_INTERRUPTED
    finally:
        held.close()
