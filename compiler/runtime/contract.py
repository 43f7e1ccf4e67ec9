"""What the compiler, `qas run`, `qas report` and the search runtime must agree on: names in, nothing out.

Defined once here and imported everywhere; compile copies this file beside every script (in
qas_runtime/), so a standalone output folder carries the same contract. Standard library only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # settings imports this module
    from .settings import Settings

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
CALIBRATION_CACHE_DIR = "calibration_cache"  # engine qas: one activation-range file per range key
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
# sampler-study attribute (search.prune): the evaluation samples' indices, hardest first (pruning.py)
EVALUATION_ORDER_ATTR = "evaluation_order"
# sampler-study attribute (keep_float strategy granular): the informed starting points are fixed on the first slots
STARTS_ATTR = "keep_float_starts"
FLOOR_ATTR = "floor"  # sampler-study attribute: the cost floor's float pass and sample counts (floor.py)
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
# with the quantized_fraction objective: {"quantized": weight nodes quantized, "weight_nodes": all of them, "fraction"}
# (quantized_share.py)
ATTR_QUANTIZED = "quantized_nodes"
# where a quantized trial's time went, seconds: {"calibrate_s", "quantize_s", "finetune_s", "evaluate_s", "latency_s",
# "calibration_cached": bool (engine qas with search.calibration_cache: the ranges were restored, not calibrated),
# "calibration_derived": bool (calibrated from a kept histogram collection, no pass over the samples)}
ATTR_STEPS = "steps"
ATTR_SAMPLES_SEEN = "samples_seen"  # a PRUNED trial (search.prune): the evaluation samples it was scored on
# sampler trials of the budget: complete, or stopped by search.prune (Optuna's n_trials counts pruned trials too)
BUDGET_STATES = ("COMPLETE", "PRUNED")
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
# search.objectives, in the order of a trial's values
OBJECTIVES = ("accuracy", "latency", "size", "quantized_fraction")
MAXIMIZED_OBJECTIVES = ("quantized_fraction",)  # the rest minimized (accuracy: by its metric's direction)
# each objective's axis and unit, beside accuracy's (named by its metric); one place for plots, report and dashboard
OBJECTIVE_LABELS = {"latency": "latency (ms per sample)", "size": "size (bytes)",
                    "quantized_fraction": "quantized fraction (of the weight nodes)"}
OBJECTIVE_UNITS = {"accuracy": "", "latency": " ms", "size": " B", "quantized_fraction": ""}
DEFAULT_MIN_TRIALS = 5  # search.stop.min_trials: complete trials before the tolerance stop may fire
DEFAULT_PATIENCE = 3  # search.stop.patience: the last trials that must not improve for the tolerance stop
DEFAULT_MARGIN = 0.02  # search.stop.margin: an improvement smaller than this fraction does not count
MULTI_OBJECTIVE_SAMPLERS = ("TPE", "Random", "GPS", "NSGAII", "QMC")  # CmaEs and Grid take one objective only


def stage_totals(sampler: str, two_stage: bool, effective_trials: int, grid_configs: int) -> tuple[int, int]:
    """The compiled budget in; (grid configurations, sampler trials) a full run completes out. The one place the
    stages' totals are computed (the search and `qas run`'s progress read it). With the Grid sampler the
    budget counts the configurations; a two-stage search has both (no sampler trials without fine-tuning: the budget
    pass sets effective_trials to 0 then)."""
    if sampler == "Grid":
        return effective_trials, 0
    return (grid_configs if two_stage else 0), effective_trials


class Engine:
    """A search engine, asked what it supports, how its outputs are named and how it runs (as Optuna's samplers and
    storages are asked): a subclass sets the class attributes and says why it refuses a feature. Never test an
    engine's name or flags elsewhere; add a method here."""

    name: str
    entry: str  # the runtime module whose main(settings, role) runs the search
    # storage kinds it can keep its study in ("journal" | "sqlite" | "url"); the first is the default
    storages: tuple[str, ...]
    writes: tuple[str, ...]  # files the search writes besides the study and the quantized models
    winner: str  # the winner's file name
    grid_winner: str  # the winner's file name when the search is grid-only
    space_in_study_name = False  # the study name carries the space hash (a changed space starts a new study)
    grid_reruns_on_resume = False  # a two-stage search re-runs its whole grid stage on every start
    keeps_outputs_in_memory = False  # scores without Quark's float-output dumps on disk
    quark_loop = False  # Quark's own AutoSearchPro.run drives it (its clamp, min-only grid and metric sessions apply)
    # FEATURES it cannot offer -> why, in the words of the QAS326 error; a feature not named here is supported
    refusals: ClassVar[dict[str, str]] = {}

    def supports(self, feature: str) -> bool:
        """A name of FEATURES in; whether this engine offers it out."""
        if feature not in FEATURES:
            raise KeyError(f"unknown engine feature {feature!r}")
        return feature not in self.refusals

    def why_not(self, feature: str) -> str:
        """A feature this engine refuses in; why, as the QAS326 error says it, out."""
        return self.refusals[feature]

    def unsupported_settings(self) -> tuple[str, ...]:
        """The Settings fields this engine does not read: compile leaves them at their defaults (the passes refuse a
        spec that sets them, QAS326)."""
        return tuple(name for name, feature in SETTING_FEATURES.items() if not self.supports(feature))

    def failures_allowed(self, settings: Settings) -> int:
        """FAIL trials before the search stops: the settings' max_failures, or 1 when the first failure ends it."""
        return settings.max_failures if self.supports("max_failures") else 1

    def reruns_grid_on_resume(self, settings: Settings) -> bool:
        """A resumed run of these settings runs its whole grid stage again."""
        return settings.two_stage and self.grid_reruns_on_resume

    def winner_pattern(self, grid_only: bool) -> str:
        """The winner's file name (a pattern with <trial> or <index>) for this kind of search."""
        return self.grid_winner if grid_only else self.winner

    def run(self, settings: Settings, role: Any) -> int:
        """Run the search of these settings in this process (launch.main has checked and locked); its exit code."""
        return importlib.import_module(f".{self.entry}", __package__).main(settings, role)

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


class QasEngine(Engine):
    """qas's own trial loop over Quark's quantizer: every feature."""

    name = "qas"
    entry = "engine_qas"
    storages = ("journal", "url")
    writes = (BEST_CONFIG_FILE, BEST_MODEL_FILE, SEARCH_LOG_FILE)
    winner = grid_winner = BEST_MODEL_FILE
    space_in_study_name = True
    keeps_outputs_in_memory = True


class AutoSearchProEngine(Engine):
    """Quark's own AutoSearchPro loop: one process, one value, Quark's files."""

    name = "autosearchpro"
    entry = "engine_autosearchpro"
    storages = ("sqlite",)  # Quark hard-wires SQLite
    writes = (BEST_CONFIG_FILE, QUARK_BEST_PARAMS_FILE, QUARK_LOG_FILE, SEARCH_LOG_FILE)
    winner = "quantized_model_<trial>.onnx"
    grid_winner = "quantized_model<index>.onnx"
    grid_reruns_on_resume = True
    quark_loop = True
    _ranks_by_one_value = "Quark's AutoSearchPro ranks by one value and runs to its budget"
    refusals: ClassVar[dict[str, str]] = {
        "keep_float": "AutoSearchPro excludes at most one node (F7)",
        "sensitivity": "AutoSearchPro excludes at most one node (F7) and runs no sensitivity analysis",
        "keep_models": "AutoSearchPro keeps every model",
        "max_failures": "AutoSearchPro stops at the first failing trial (F10)",
        "trial_timeout": "AutoSearchPro runs its trials in its own loop",
        "calibration_cache": "AutoSearchPro calibrates every trial in its own loop",
        "prune": "AutoSearchPro scores every trial whole in its own loop",
        "export": "AutoSearchPro records Optuna's flattened parameters, not the nested config a model is rebuilt from",
        "workers": "Quark's n_jobs above 1 crashes (F2)",
        "launch": "Quark's AutoSearchPro runs one process (F2)",
        "objectives": _ranks_by_one_value,
        "stop_rules": _ranks_by_one_value,
        "tracking": "Quark's AutoSearchPro runs its own trial loop, with no place to log each trial",
    }


# What an engine may offer (Engine.supports): keep_float node lists, op types and subgraphs; the sensitivity ranking
# and keep_float.search; keep_models pruning; max_failures (else the first failure ends the search); trial_timeout;
# several workers on one study; cluster launch files; search.objectives, evaluation.tolerance and the winner rule;
# search.stop; output.mlflow tracking.
FEATURES = ("keep_float", "sensitivity", "keep_models", "max_failures", "trial_timeout", "calibration_cache",
            "prune", "export", "workers", "launch", "objectives", "stop_rules", "tracking")
# The Settings fields each feature decides: an engine without the feature gets the field's default.
SETTING_FEATURES = {"max_failures": "max_failures", "trial_timeout": "trial_timeout", "keep_models": "keep_models",
                    "calibration_cache": "calibration_cache", "prune": "prune",
                    "keep_float": "keep_float", "sensitivity": "sensitivity", "workers": "workers",
                    "objectives": "objectives", "tolerance": "objectives", "mlflow": "tracking", "stop": "stop_rules"}


def engines_supporting(feature: str) -> str:
    """A feature in; the engines that offer it, as 'qas' or 'a or b', out (for a QAS326 message)."""
    return " or ".join(name for name, engine in ENGINES.items() if engine.supports(feature))


ENGINES: dict[str, Engine] = {engine.name: engine for engine in (QasEngine(), AutoSearchProEngine())}
DEFAULT_ENGINE = "qas"
