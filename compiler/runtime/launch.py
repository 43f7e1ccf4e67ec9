"""The script's entry point: settings and the script's arguments in; the checks, the engine's search, and the
process exit code out.

`python <name>_autosearch.py [--verbose] [--workers N]`: run the search here (with N worker processes);
`... --worker [--worker-index K]`: join the study as one more worker (another machine, a cluster task).
Without --verbose, library output (Quark, onnxruntime, torch) goes to search.log in the output folder
and the terminal shows qas's own lines.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Any

from . import contract, lock, stopping
from .checks import check_device, check_model, check_packages
from .console import route_library_output, set_tag, warn
from .export import ExportRequest
from .lock import release_worker_lock
from .redact import scrubbed
from .roles import Role, default_index, index_problem, workers_problem
from .settings import Settings
from .workers import apply_share


def parse_args(argv: list[str] | None, settings: Settings) -> Role:
    """The script's arguments in; this process's role out (argparse exits EXIT_USAGE on bad ones)."""
    parser = argparse.ArgumentParser(description="Run (or resume) the quantization search compiled by qas.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show Quark's, onnxruntime's and torch's output here instead of in "
                             f"{contract.SEARCH_LOG_FILE}")
    parser.add_argument("--workers", type=int, default=settings.workers, metavar="N",
                        help=f"worker processes on this machine (default {settings.workers}, the spec's "
                             "search.workers)")
    parser.add_argument("--worker", action="store_true",
                        help="join the study as one more worker (another machine or a cluster task); the storage "
                             "must be shared (storage.url_env) for workers on other machines")
    parser.add_argument("--worker-index", type=int, default=None, metavar="K",
                        help="this worker's index: its sampler seed differs by it (default: $JOB_COMPLETION_INDEX, "
                             "$SLURM_ARRAY_TASK_ID, else 0)")
    parser.add_argument("--sensitivity", action="store_true",
                        help=f"only rank nodes and blocks by sensitivity into {contract.SENSITIVITY_FILE} (reused when "
                             "nothing it depends on changed), then stop")
    parser.add_argument("--export", type=int, default=None, metavar="N",
                        help="rebuild trial N's model from its recorded configuration, score it and compare with the "
                             "recorded value (no search runs)")
    parser.add_argument("--export-stage", choices=(contract.STAGE_GRID, contract.STAGE_SAMPLER), default=None,
                        help="the stage of trial N (default: sampler, or grid when the search runs only a grid)")
    parser.add_argument("--export-to", default=None, metavar="PATH",
                        help="where the model goes (default: exported_<stage>_<N>.onnx in the output folder)")
    parser.add_argument("--export-pareto", action="store_true",
                        help="rebuild every member of the Pareto front (search.objectives)")
    parser.add_argument("--spawned", action="store_true", help=argparse.SUPPRESS)  # a launcher's worker
    args = parser.parse_args(argv)
    index, source = default_index() if args.worker_index is None else (args.worker_index, None)
    for problem in (workers_problem(args.workers), index_problem(index, source)):
        if problem:
            parser.error(problem)
    engine = contract.ENGINES[settings.engine]
    if not engine.supports("workers") and (args.workers > 1 or args.worker):
        parser.error(f"engine {engine.name} runs one process (Quark's n_jobs above 1 crashes); "
                     "use engine qas for several workers")
    if args.sensitivity and not engine.supports("sensitivity"):
        parser.error(f"engine {engine.name} has no sensitivity analysis; use engine qas")
    return Role(workers=args.workers, worker=args.worker or args.spawned, index=index, spawned=args.spawned,
                verbose=args.verbose, sensitivity_only=args.sensitivity, export=export_request(parser, args, engine))


def export_request(parser: argparse.ArgumentParser, args: argparse.Namespace, engine: Any) -> ExportRequest | None:
    """The --export options in; the request (None without them) out; a contradiction is a usage error."""
    if args.export is None and not args.export_pareto:
        if args.export_stage is not None or args.export_to is not None:
            parser.error("--export-stage and --export-to go with --export N")
        return None
    if not engine.supports("export"):
        parser.error(f"engine {engine.name} cannot export a trial: {engine.why_not('export')}")
    if args.export is not None and args.export_pareto:
        parser.error("give --export N or --export-pareto, not both")
    if args.export_pareto and (args.export_stage is not None or args.export_to is not None):
        parser.error("--export-pareto writes exported_sampler_<N>.onnx for each member of the front; drop "
                     "--export-stage and --export-to")
    if args.export is not None and args.export < 0:
        parser.error("--export takes a trial number (0 or more)")
    to = os.path.abspath(args.export_to) if args.export_to is not None else None  # the caller's folder, not ours
    return ExportRequest(args.export, args.export_stage, to, args.export_pareto)


def main(settings: Settings, argv: list[str] | None = None) -> int:
    """Check packages and the device (exit EXIT_USAGE before any work), lock the study, then run the engine.

    SIGINT and SIGTERM stop the search cleanly from here on (exit EXIT_INTERRUPTED); an unexpected error
    ends it with EXIT_FAILED and its traceback in the log, not on the terminal.
    """
    role = parse_args(argv, settings)
    stopping.install()
    stopping.end_with_launcher()  # started by `qas run` or a launcher: never outlive it
    apply_share()  # a launcher's worker: its share of the cores, before torch or onnxruntime start threads
    check_packages(settings.requirements)
    check_device(settings.device)
    check_model(settings.model_path, settings.model_sha256)
    # One launcher per study and machine; a worker joins on purpose (the slots keep the budget exact)
    # An export only reads the study (it may run beside the search)
    held = None if role.worker or role.export else lock.acquire(settings.path(settings.study_db))
    log = settings.path(contract.SEARCH_LOG_FILE)
    if not role.verbose:
        route_library_output(log)
    if role.worker:
        set_tag(f"worker {role.index}")
    try:
        return contract.ENGINES[settings.engine].run(settings, role)
    except KeyboardInterrupt:  # stopped before or after the trial loop (the loop handles its own)
        warn("qas: interrupted; re-run to resume")
        return contract.EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - a bug or an environment fault: say so, keep the traceback
        # A database error may quote what the driver read out of the storage URL: never its password.
        url = os.environ.get(settings.storage.get("env") or "", "") if settings.storage_kind == "url" else ""
        sys.stderr.write(scrubbed(traceback.format_exc(), url))  # into the log, or here with --verbose
        where = "above" if role.verbose else f"in {log}"
        warn(scrubbed(f"qas: error: the search stopped on an unexpected {type(error).__name__}: {error}; "
                      f"the traceback is {where}", url))
        return contract.EXIT_FAILED
    finally:
        release_worker_lock()
        if held is not None:
            held.close()
