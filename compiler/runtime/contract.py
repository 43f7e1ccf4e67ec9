"""What the compiler, `qas run`, `qas report` and the search runtime must agree on: names in, nothing out.

Defined once here and imported everywhere; compile copies this file beside every script (in
qas_runtime/), so a standalone output folder carries the same contract. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- Files in an output folder ---------------------------------------------------------------------
MANIFEST_FILE = "run_manifest.yaml"
QUANT_PLAN_FILE = "quant_plan.json"
MODEL_ANALYSIS_FILE = "model_analysis.json"
BEST_CONFIG_FILE = "best_config.json"
BEST_MODEL_FILE = "best_model.onnx"
RUNTIME_PACKAGE = "qas_runtime"  # the runtime copy's folder beside the script
RUN_LOG_FILE = "qas_run.log"  # what `qas run` tee'd from the script
SEARCH_LOG_FILE = "search.log"  # the script's library output (Quark, onnxruntime, torch), unless --verbose
STAGE2_SPACE_FILE = "qas_sampler_space.json"  # engine autosearchpro: the sampler stage's space
QUARK_BEST_PARAMS_FILE = "best_params.json"  # written by Quark's AutoSearchPro only
QUARK_LOG_FILE = "auto_search.log"  # written by Quark's AutoSearchPro only
SENSITIVITY_FILE = "sensitivity.json"  # engine qas: the sensitivity ranking (and its cache key)
PLOTS_DIR = "report"  # the plots (output.plots and `qas report`) and the one plotly.min.js they share
PARETO_FILE = "pareto.json"  # engine qas with search.objectives: the Pareto front of the complete trials


def script_file(name: str) -> str:
    """The spec's name in; the settings script's file name out."""
    return f"{name}_autosearch.py"


STORAGE_FILE_SUFFIXES = {"journal": ".journal", "sqlite": ".db", "url": ""}  # storage kind -> study file suffix


def study_file(name: str, kind: str = "journal") -> str:
    """The spec's name and the storage kind in; the study file's name out: <name>_study.journal (Optuna's
    JournalFileBackend), <name>_study.db (SQLite), or for a database URL <name>_study, the base name of the
    local lock files."""
    return f"{name}_study{STORAGE_FILE_SUFFIXES[kind]}"


# --- Studies ---------------------------------------------------------------------------------------
GRID_STUDY_SUFFIX = "-grid"  # engine qas keeps grid-stage trials in study <name>-grid
STUDY_HASH_CHARS = 12  # engine qas names its study <name>-<first chars of the space's sha256>
GRID_WINNER_ATTR = "grid_winner"  # sampler-study attribute: the pinned grid winner's trial number
# sampler-study attribute (and best_config.json key): the float model's score under the user evaluator, as the
# evaluator returned it; trial values are the drop from it (higher_is_better) or the rise over it (lower is better)
FLOAT_SCORE_ATTR = "float_score"
# built-in task metrics: a classifier's accuracy against evaluation.labels, the label among the k highest outputs;
# higher is better, so a trial's value is the drop from the float model's accuracy (as a user evaluator's is)
TASK_METRICS = {"top1": 1, "top5": 5}
FLOAT_LATENCY_ATTR = "float_latency"  # sampler-study attribute: the float model's latency record (latency.py)
FLOAT_SIZE_ATTR = "float_size"  # sampler-study attribute: the float model's bytes (file plus external data)
# sampler-study attribute: {"reason": "tolerance" | "timeout", "at": ISO time, ...}, written once under the slot
# lock when a stop rule fires; every worker reads it before claiming a slot, and the search counts as ended
STOPPED_ATTR = "stopped"
STARTED_ATTR = "started_at"  # sampler-study attribute: epoch seconds of the first claimed trial (search.stop.timeout)
# study attribute qas writes on each study it creates (its role: STAGE_GRID | STAGE_SAMPLER), so a study another
# program made under the same name is told apart (studies from before it carry qas's trial attributes instead)
QAS_STUDY_ATTR = "qas_study"

# --- Trial user attributes -------------------------------------------------------------------------
ATTR_STAGE = "stage"  # STAGE_GRID | STAGE_SAMPLER
ATTR_CONFIG = "config"  # the nested Quark config the trial quantized with
ATTR_MODEL = "model"  # the quantized model's file name in the output folder
ATTR_GRID_INDEX = "grid_index"  # grid trials: the index into the grid configurations
ATTR_REUSED_FROM = "reused_from"  # a repeated configuration: the trial that was really quantized
ATTR_INTERRUPTED = "interrupted"  # a FAIL trial that was stopped, not failed (not a failure)
ATTR_ERROR = "error"  # a FAIL trial: "<ExceptionType>: <message>" (an evaluator's: its traceback on the lines after)
ATTR_SLOT = "slot"  # an enqueued (WAITING) trial of the budget: STAGE_GRID | STAGE_SAMPLER
ATTR_WORKER = "worker"  # who ran the trial: "<index>@<host>:<pid>"
ATTR_ARTIFACT = "artifact"  # with storage.artifacts: the trial's model in Optuna's artifact store
ATTR_KEEP_FLOAT = "keep_float"  # keep_float.search: {"choice", "groups", "nodes"} the trial kept in float
ATTR_RETRIED_FROM = "retried_from"  # a slot queued again for a trial whose worker stopped: that trial's number
ATTR_WITHIN_TOLERANCE = "within_tolerance"  # with evaluation.tolerance: the trial's loss is within it (bool)
ATTR_LATENCY = "latency"  # with the latency objective: {"median_ms", "spread_ms", "ratio", "rounds", ...} (latency.py)
ATTR_SIZE = "size_bytes"  # with the size objective: the model file plus its external data, in bytes
STAGE_GRID = "grid"
STAGE_SAMPLER = "sampler"

# --- Exit codes of the script ----------------------------------------------------------------------
EXIT_OK = 0
EXIT_FAILED = 1  # the search ran and could not finish (an uncaught error)
EXIT_USAGE = 2  # refused before any work: a missing package, device, file or study
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C; re-running resumes
PARENT_PID_ENV = "QAS_PARENT_PID"  # set by `qas run` and a launcher of workers: the script stops when that pid ends

# --- Quark's grammar facts the runtime needs -------------------------------------------------------
FINETUNE_KEYS = ("algorithms", "adaround_params", "adaquant_params")  # searched in stage 2, never in the grid
SAMPLER_CLASSES = {
    "TPE": "TPESampler",
    "Random": "RandomSampler",
    "CmaEs": "CmaEsSampler",
    "GPS": "GPSampler",
    "NSGAII": "NSGAIISampler",
    "QMC": "QMCSampler",
}
PROVIDERS = {"cpu": ["CPUExecutionProvider"], "cuda": ["CUDAExecutionProvider"], "rocm": ["ROCMExecutionProvider"]}
# distributions whose module is named otherwise
IMPORT_NAMES = {"amd-quark": "quark", "pillow": "PIL", "google-re2": "re2", "mlflow-skinny": "mlflow"}
# search.workers and output.launch.*.workers at most (schemas/spec.schema.json); --worker-index below it
MAX_WORKERS = 256
DEFAULT_MAX_FAILURES = 5  # FAIL trials (not interrupted) before engine qas stops the search
DEFAULT_HEARTBEAT_SECONDS = 10.0  # storage url: a running worker's heartbeat interval
DEFAULT_GRACE_SECONDS = 60.0  # storage url: a trial whose worker sent no heartbeat for this long is taken back
OBJECTIVES = ("accuracy", "latency", "size")  # search.objectives, in the order of a trial's values
DEFAULT_MIN_TRIALS = 5  # search.stop.min_trials: complete trials before the tolerance stop may fire
DEFAULT_PATIENCE = 3  # search.stop.patience: the last trials that must not improve for the tolerance stop
DEFAULT_MARGIN = 0.02  # search.stop.margin: an improvement smaller than this fraction does not count
MULTI_OBJECTIVE_SAMPLERS = ("TPE", "Random", "GPS", "NSGAII", "QMC")  # CmaEs and Grid take one objective only


@dataclass(frozen=True)
class Engine:
    """What one search engine supports, and how its outputs are named."""

    name: str
    entry: str  # the runtime module whose main(settings) runs the search
    keep_float: bool  # applies keep_float (node lists, op types, subgraphs)
    keep_models: bool  # prunes models by keep_models
    max_failures: bool  # goes on after a failing trial, up to max_failures (else the first failure ends it)
    trial_timeout: bool  # stops a trial that runs past search.trial_timeout
    # storage kinds it can keep its study in ("journal" | "sqlite" | "url"); the first is the default
    storages: tuple[str, ...]
    workers: bool  # runs several worker processes on one study (search.workers > 1, output.launch)
    sensitivity: bool  # ranks nodes by sensitivity and searches how many to keep in float (keep_float.search)
    space_in_study_name: bool  # the study name carries the space hash (a changed space starts a new study)
    grid_reruns_on_resume: bool  # a two-stage search re-runs its whole grid stage on every start
    keeps_outputs_in_memory: bool  # scores without Quark's float-output dumps on disk
    quark_loop: bool  # Quark's own AutoSearchPro.run drives it (its clamp, min-only grid and metric sessions apply)
    writes: tuple[str, ...]  # files the search writes besides the study and the quantized models
    winner: str  # the winner's file name
    grid_winner: str  # the winner's file name when the search is grid-only
    objectives: bool = False  # search.objectives (latency, size), evaluation.tolerance and the winner rule
    stop_rules: bool = False  # search.stop (at_tolerance, timeout), honoured by every worker
    tracking: bool = False  # output.mlflow: each finished trial logged as an MLflow run

    def winner_pattern(self, grid_only: bool) -> str:
        """The winner's file name (a pattern with <trial> or <index>) for this kind of search."""
        return self.grid_winner if grid_only else self.winner


ENGINES = {
    "qas": Engine(
        name="qas", entry="engine_qas", keep_float=True, keep_models=True, max_failures=True, trial_timeout=True,
        storages=("journal", "url"), workers=True, sensitivity=True, space_in_study_name=True,
        grid_reruns_on_resume=False, keeps_outputs_in_memory=True, quark_loop=False,
        writes=(BEST_CONFIG_FILE, BEST_MODEL_FILE, SEARCH_LOG_FILE), winner=BEST_MODEL_FILE,
        grid_winner=BEST_MODEL_FILE, objectives=True, stop_rules=True, tracking=True),
    "autosearchpro": Engine(
        name="autosearchpro", entry="engine_autosearchpro", keep_float=False, keep_models=False, max_failures=False,
        # Quark hard-wires SQLite; its n_jobs > 1 crashes (F2)
        trial_timeout=False, storages=("sqlite",), workers=False, sensitivity=False,
        space_in_study_name=False, grid_reruns_on_resume=True, keeps_outputs_in_memory=False, quark_loop=True,
        writes=(BEST_CONFIG_FILE, QUARK_BEST_PARAMS_FILE, QUARK_LOG_FILE, SEARCH_LOG_FILE),
        winner="quantized_model_<trial>.onnx", grid_winner="quantized_model<index>.onnx"),
}
DEFAULT_ENGINE = "qas"
