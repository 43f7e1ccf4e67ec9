"""The script's entry point: settings and the script's arguments in; the checks, the engine's search, and the
process exit code out.

`python <name>_autosearch.py [--verbose]`: without --verbose, library output (Quark, onnxruntime, torch)
goes to search.log in the output folder and the terminal shows qas's own lines.
"""

from __future__ import annotations

import argparse
import importlib
import traceback

from . import contract, lock, stopping
from .checks import check_device, check_model, check_packages
from .console import route_library_output, warn
from .settings import Settings


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run (or resume) the quantization search compiled by qas.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help=f"show Quark's, onnxruntime's and torch's output here instead of in {contract.SEARCH_LOG_FILE}")
    return parser.parse_args(argv)


def main(settings: Settings, argv: list[str] | None = None) -> int:
    """Check packages and the device (exit EXIT_USAGE before any work), lock the study, then run the engine.

    SIGINT and SIGTERM stop the search cleanly from here on (exit EXIT_INTERRUPTED); an unexpected error
    ends it with EXIT_FAILED and its traceback in the log, not on the terminal.
    """
    args = parse_args(argv)
    stopping.install()
    check_packages(settings.requirements)
    check_device(settings.device)
    check_model(settings.model_path, settings.model_sha256)
    held = lock.acquire(settings.path(settings.study_db))
    log = settings.path(contract.SEARCH_LOG_FILE)
    if not args.verbose:
        route_library_output(log)
    try:
        engine = importlib.import_module(f".{contract.ENGINES[settings.engine].entry}", __package__)
        return engine.main(settings)
    except KeyboardInterrupt:  # stopped before or after the trial loop (the loop handles its own)
        warn("qas: interrupted; re-run to resume")
        return contract.EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - a bug or an environment fault: say so, keep the traceback
        traceback.print_exc()  # into the log (stderr), or here with --verbose
        where = "above" if args.verbose else f"in {log}"
        warn(f"qas: error: the search stopped on an unexpected {type(error).__name__}: {error}; "
             f"the traceback is {where}")
        return contract.EXIT_FAILED
    finally:
        held.close()
