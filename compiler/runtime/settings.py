"""A compiled search's settings: the literals of `<name>_autosearch.py` in; resolved paths and stage facts out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import contract


def _note(text: str) -> dict[str, str]:
    """A field's comment in the compiled script (the line above it there)."""
    return {"note": text}


def _as_written(spec_path: str, note: str | None = None) -> dict[str, str]:
    """A field compile copies from the spec unchanged: its dotted path in compiler.front.model.Spec (a new key of this
    kind is declared in three places: the spec's schema, the Spec dataclass, this field)."""
    return {"spec": spec_path} | ({} if note is None else _note(note))


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every value the spec decided, as compile wrote it; paths are relative to the script's folder.

    The one declaration of a compiled setting: compile builds this record (compiler/back/script_settings.py) and
    writes it into the script field by field in this order, leaving out a field whose value is its default (a new key
    with a default changes only the scripts of specs that set it); quant_plan.json carries the same fields.
    """

    script: str  # the settings script's __file__: the output folder is its folder
    engine: str  # a key of contract.ENGINES
    spec_hash: str
    space_hash: str
    device: str = field(metadata=_as_written("device"))  # cpu | cuda:N | rocm:N, never changed
    torch_device: str  # what torch calls it (rocm:N is cuda:N in a ROCm build)
    model: str
    # the model file and its external data, by name in the model's folder -> sha256
    model_sha256: dict[str, str] = field(metadata=_note("checked at start: a changed model needs a recompile"))
    # {"folder", "limit"} | {"images", "limit", "input", "preprocess"} | {"file", "class", "args"}
    calibration: dict[str, Any]
    # the same kinds; None: the calibration samples are the evaluation samples
    eval_data: dict[str, Any] | None = field(metadata=_note("None: the calibration samples are the evaluation "
                                                             "samples too"))
    metric: str | None  # a Quark metric against the float outputs, or None with a user evaluator
    evaluator: dict[str, Any] | None  # {"file", "function", "higher_is_better"}
    # metric top1/top5: each evaluation sample's class index, {"array": name in every .npz sample} | {"file": a .npy
    # or .json list, relative to the output folder, one entry a sample}; None for every other metric
    labels: dict[str, Any] | None = field(default=None, metadata=_note("top1/top5: each evaluation sample's class "
                                                                        "index"))
    direction: str  # minimize | maximize
    sampler: str = field(metadata=_as_written("search.sampler"))  # a key of contract.SAMPLER_CLASSES, or "Grid"
    seed: int = field(metadata=_as_written("search.seed"))
    n_trials: int  # the effective budget: complete sampler trials (Grid: configurations)
    two_stage: bool
    # the grid stage's configurations (Quark's generate_all_configs)
    grid_configs: int = field(metadata=_note("the grid stage (Quark's generate_all_configs)"))
    study_name: str
    study_db: str  # file name in the output folder
    resume: bool = field(metadata=_as_written("output.resume"))
    plots: bool = field(metadata=_as_written("output.plots"))
    temp_dir: str
    max_failures: int = contract.DEFAULT_MAX_FAILURES
    # seconds a trial may run before it is stopped and failed
    trial_timeout: float | None = field(default=None, metadata=_note("seconds; None: no limit"))
    keep_models: str = field(default="all", metadata=_as_written("output.keep_models"))  # all | best | top-K
    # engine qas: trials with the same range key restore the ranges of the first (calibration_cache.py)
    calibration_cache: bool = field(default=False, metadata=_note("calibrate once per range key "
                                                                   "(calibration_cache/)"))
    # search.prune: "wilcoxon" (sampler trials scored sample by sample, stopped by Optuna's WilcoxonPruner); None: off
    prune: str | None = field(default=None, metadata=_as_written("search.prune", "sampler trials scored sample by "
                                                                                  "sample, stopped when hopeless"))
    keep_float: dict[str, Any] = field(default_factory=lambda: {"nodes": [], "op_types": [], "subgraphs": []})
    # engine qas, when the spec declares it: {"method": "L2" | "KL" | "cosine", "samples": N, "aggregate": "sum" | "max"
    # | "mean", "blocks": {name: [regex]}, "top": bars in the chart, "base": a nested config, "search": None |
    # {"top_k": [k, ...]} | {"coverage": {"low": f, "high": f}}}; None: the analysis runs only on `--sensitivity`,
    # with sensitivity.DEFAULTS
    sensitivity: dict[str, Any] | None = field(default=None, metadata=_note(
        "ranked once before the search (sensitivity.json, reused while the model, base, data and method are the same)"))
    # worker processes `python <script>` starts on this machine (search.workers; --workers N overrides)
    workers: int = field(default=1, metadata=_note("processes on this machine; --workers N overrides"))
    # where the study lives: {"kind": "journal"} (study_db is <name>_study.journal, Optuna's JournalFileBackend: several
    # processes on one machine) | {"kind": "sqlite"} (study_db is <name>_study.db; engine autosearchpro, one process) |
    # {"kind": "url", "env": "QAS_STORAGE_URL", "artifacts": "/shared/dir" or None, "heartbeat": 10.0, "grace": 60.0}
    # (a PostgreSQL URL read from that environment variable at run time; study_db is then <name>_study, the base name
    # of the local lock files)
    storage: dict[str, Any] = field(default_factory=lambda: {"kind": "sqlite"})
    # engine qas: what each trial's values are, in contract.OBJECTIVES order (["accuracy"]: one value, as before)
    objectives: list[str] = field(default_factory=lambda: ["accuracy"],
                                  metadata=_note("each trial's values, in this order"))
    # evaluation.tolerance: {"value": 0.01, "relative": False} (in the objective's units) | {"value": 0.01,
    # "relative": True} (a fraction of the float model's score, user evaluators only); None: none declared
    tolerance: dict[str, Any] | None = field(default=None, metadata=_note("relative: a fraction of the float "
                                                                           "model's score"))
    # output.mlflow: {"env": the variable holding the tracking URI (never the URI), "experiment": name}; None: no
    # tracking
    mlflow: dict[str, str] | None = field(default=None, metadata=_note(
        "each finished trial an MLflow run; the tracking URI is read from env"))
    # search.stop: {"at_tolerance": bool, "min_trials": int, "patience": int, "margin": float, "timeout": seconds
    # or None}; None: the search runs to its budget
    stop: dict[str, Any] | None = field(default=None, metadata=_note("timeout in seconds from the study's first "
                                                                      "trial"))
    requirements: dict[str, str]  # package -> version range the script needs
    # Quark's grammar, in Quark's order
    search_space: dict[str, Any] = field(metadata=_note("Quark reads the space in insertion order: conditions come "
                                                         "before the groups that use them."))

    @property
    def keep_float_search(self) -> dict[str, Any] | None:
        """The keep_float search dimension, when the space has one."""
        return (self.sensitivity or {}).get("search")

    @property
    def accuracy_control(self) -> bool:
        """keep_float.search strategy accuracy_control: the sampler stage's steps come from accuracy_control.py."""
        return (self.keep_float_search or {}).get("strategy") == "accuracy_control"

    @property
    def here(self) -> Path:
        """The output folder (the script's folder)."""
        return Path(self.script).resolve().parent

    def path(self, relative: str | Path) -> Path:
        """A path relative to the output folder, made absolute."""
        return self.here / relative

    @property
    def model_path(self) -> Path:
        return self.path(self.model)

    @property
    def storage_url(self) -> str:
        """The SQLite URL of a sqlite storage (engine autosearchpro hands it to Quark)."""
        return f"sqlite:///{self.path(self.study_db)}"

    @property
    def storage_kind(self) -> str:
        return self.storage["kind"]

    @property
    def grid_study_name(self) -> str:
        return self.study_name + contract.GRID_STUDY_SUFFIX

    @property
    def best_config_path(self) -> Path:
        return self.path(contract.BEST_CONFIG_FILE)

    @property
    def best_model_path(self) -> Path:
        return self.path(contract.BEST_MODEL_FILE)

    @property
    def multi_objective(self) -> bool:
        """Trials carry several values (a multi-objective Optuna study)."""
        return len(self.objectives) > 1

    @property
    def winner_rule(self) -> bool:
        """The recommended-winner rule ranks the trials (objectives or a tolerance declared); else by value alone."""
        return self.multi_objective or self.tolerance is not None

    @property
    def directions(self) -> list[str]:
        """Each objective's direction: accuracy by the metric, quantized_fraction maximized, latency and size
        minimized."""
        return [self.direction if name == "accuracy" else "maximize" if name in contract.MAXIMIZED_OBJECTIVES
                else "minimize" for name in self.objectives]

    def stage_totals(self) -> tuple[int, int]:
        """(grid configurations to complete, sampler trials to complete) for this budget."""
        return contract.stage_totals(self.sampler, self.two_stage, self.n_trials, self.grid_configs)

    @property
    def grid_only(self) -> bool:
        """Only grid configurations run: the Grid sampler, or a two-stage search whose space has no fine-tuning."""
        return self.sampler == "Grid" or (self.two_stage and not self.has_finetune_stage and not self.accuracy_control)

    @property
    def has_finetune_stage(self) -> bool:
        """A two-stage search samples in stage 2 only when the space has fine-tuning algorithms."""
        return "algorithms" in self.search_space
