"""The typed spec: schema-valid plain data in, frozen dataclasses out; each node keeps its YAML path.

Mappings inside (space, override, args) are the loaded data itself: treat them as read-only and
deep-copy before changing anything.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from compiler.diagnostics import YamlPath
from compiler.runtime.contract import DEFAULT_ENGINE

T = TypeVar("T")

DEFAULT_OUTPUT_DIR = "autosearch_output"
DEFAULT_LETTERBOX_PAD = 114  # the grey YOLO models are trained with


@dataclass(frozen=True)
class PreprocessSpec:
    """How an image becomes a tensor; scale, mean and std stay None when the spec does not write them."""

    path: YamlPath
    resize: tuple[int, int]  # (height, width)
    letterbox: int | None = None  # the padding pixel value when the aspect ratio is kept; None: stretched to resize
    layout: str = "NCHW"  # "NCHW" | "NHWC"
    color: str = "RGB"  # "RGB" | "BGR" | "L"
    dtype: str = "float32"  # "float32" | "float16" | "uint8" | "int8"
    scale: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None


@dataclass(frozen=True)
class ReaderSpec:
    path: YamlPath
    folder: str | None = None
    limit: int | None = None
    reader: str | None = None  # "file.py:Class"
    args: dict[str, Any] = field(default_factory=dict)
    images: str | None = None  # a folder of image files
    preprocess: PreprocessSpec | None = None  # with images (the schema requires it)
    input: str | None = None  # with images: the model input it feeds, when the spec names it


@dataclass(frozen=True)
class EvaluationSpec:
    path: YamlPath
    metric: str | None = "L2"
    evaluator: str | None = None  # "file.py:function"
    higher_is_better: bool | None = None
    data: ReaderSpec | None = None
    labels: str | None = None  # top1/top5: an array name in the .npz samples, or a .npy / .json file (spec-relative)
    tolerance: float | str | None = None  # a number (the objective's units) or "1%" (of the float score); None: none


@dataclass(frozen=True)
class StopSpec:
    """search.stop: the tolerance stop and the whole search's time budget (defaults in contract)."""

    path: YamlPath
    at_tolerance: bool = False
    min_trials: int | None = None  # None: contract.DEFAULT_MIN_TRIALS
    patience: int | None = None  # None: contract.DEFAULT_PATIENCE
    margin: float | None = None  # None: contract.DEFAULT_MARGIN
    timeout: float | str | None = None  # seconds, or "90m" / "2h"; None: no time budget


@dataclass(frozen=True)
class SearchSpec:
    path: YamlPath
    n_trials: int
    preset: str | None = None
    space: dict[str, Any] | None = None
    override: dict[str, Any] | None = None
    sampler: str = "TPE"
    seed: int = 0
    allow_over_200_trials: bool = False
    two_stage: bool | None = None  # None: the preset's own setting (false for a custom space)
    engine: str = DEFAULT_ENGINE  # "qas" (qas's own Optuna loop) | "autosearchpro" (Quark's run())
    max_failures: int | None = None  # None: contract.DEFAULT_MAX_FAILURES (resolved.max_failures applies it)
    trial_timeout: float | str | None = None  # seconds, or "90s" / "10m" / "2h"; None: no limit
    calibration_cache: bool | None = None  # None: as written nowhere (on for engine qas)
    prune: str | None = None  # "wilcoxon"; None: every trial scored on every sample
    workers: int = 1  # worker processes `python <script>` starts on this machine
    objectives: tuple[str, ...] | None = None  # as written; None: accuracy alone
    stop: StopSpec | None = None


@dataclass(frozen=True)
class StorageSpec:
    """Where the study lives when the spec says so: the journal file, or a database URL in an environment variable."""

    path: YamlPath
    kind: str  # "journal" | "url"
    url_env: str | None = None  # url: the environment variable's name (never its value)
    artifacts: str | None = None  # url: a folder shared by the workers, as written (absolute, or relative to the spec)
    heartbeat: int | str | None = None  # url: seconds or "10s" / "1m"; None: contract.DEFAULT_HEARTBEAT_SECONDS
    grace_period: int | str | None = None  # url: the same; None: contract.DEFAULT_GRACE_SECONDS


@dataclass(frozen=True)
class KubernetesSpec:
    path: YamlPath  # the mapping, or the list item `kubernetes`
    image: str | None = None  # None only in the list form (the launch pass refuses it)
    workers: int | None = None  # None: search.workers
    gpus: int | None = None  # None: the device index plus one (none for cpu)
    secret: str = "qas-storage"
    namespace: str | None = None
    workdir: str = "/workspace"
    volume_claim: str | None = None
    retries: int = 3
    python: str = "python3"


@dataclass(frozen=True)
class SlurmSpec:
    path: YamlPath
    workers: int | None = None  # None: search.workers
    gpus: int | None = None  # None: the device index plus one (none for cpu)
    partition: str | None = None
    account: str | None = None
    gpu_type: str | None = None
    cpus_per_task: int | None = None
    time: int | str | None = None  # seconds or "90m" / "12h"; None: the partition's default
    python: str = "python3"


@dataclass(frozen=True)
class LaunchSpec:
    path: YamlPath
    kubernetes: KubernetesSpec | None = None
    slurm: SlurmSpec | None = None

    @property
    def empty(self) -> bool:
        return self.kubernetes is None and self.slurm is None


@dataclass(frozen=True)
class OutputSpec:
    path: YamlPath
    dir: str = DEFAULT_OUTPUT_DIR
    temp_dir: str | None = None
    plots: bool = False
    study_name: str | None = None
    resume: bool = True
    allow_outside_workspace: bool = False
    keep_models: str = "all"  # "all" | "best" | "top-K"
    mlflow: dict[str, str] | None = None  # {"tracking_uri_env": NAME, "experiment": TEXT (optional)}: the names, no URI
    launch: LaunchSpec = field(default_factory=lambda: LaunchSpec(path=("output", "launch")))


@dataclass(frozen=True)
class KeepFloatSpec:
    path: YamlPath
    nodes: tuple[str, ...] = ()
    op_types: tuple[str, ...] = ()
    subgraphs: tuple[tuple[str, str], ...] = ()
    blocks: dict[str, list[str]] = field(default_factory=dict)  # block name -> regexes, in the spec's order
    sensitivity: dict[str, Any] | None = None  # {metric, samples, aggregate, top, base} as written
    # {"top_k": [...]} | {"coverage": {"low", "high"}} | {"strategy": "partitioned", "sections": K}
    # | {"strategy": "granular" | "accuracy_control"}
    search: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        """No fixed node, op type or subgraph (the sensitivity keys are judged on their own)."""
        return not (self.nodes or self.op_types or self.subgraphs)

    @property
    def uses_sensitivity(self) -> bool:
        """The spec declares the sensitivity analysis, its blocks or its search dimension."""
        return bool(self.blocks) or self.sensitivity is not None or self.search is not None


@dataclass(frozen=True)
class Spec:
    file: Path  # the spec file, absolute
    text: str  # its exact text (hashed into the outputs)
    name: str
    model: str
    calibration: ReaderSpec
    evaluation: EvaluationSpec
    search: SearchSpec
    device: str
    output: OutputSpec
    keep_float: KeepFloatSpec
    storage: StorageSpec | None = None  # None: the engine's default storage (contract.Engine.storages[0])

    @property
    def workspace(self) -> Path:
        """The folder paths are relative to, and outputs are confined to."""
        return self.file.parent


def _preprocess(data: dict[str, Any], path: YamlPath) -> PreprocessSpec:
    optional = {k: tuple(data[k]) if isinstance(data[k], list) else data[k]
                for k in ("scale", "mean", "std") if k in data}
    letterbox = data["letterbox"].get("pad", DEFAULT_LETTERBOX_PAD) if "letterbox" in data else None
    return PreprocessSpec(path=path, resize=(data["resize"][0], data["resize"][1]), layout=data.get("layout", "NCHW"),
                          color=data.get("color", "RGB"), dtype=data.get("dtype", "float32"), letterbox=letterbox,
                          **optional)


def _reader(data: dict[str, Any], path: YamlPath) -> ReaderSpec:
    preprocess = _preprocess(data["preprocess"], (*path, "preprocess")) if "preprocess" in data else None
    return ReaderSpec(path=path, folder=data.get("folder"), limit=data.get("limit"),
                      reader=data.get("reader"), args=data.get("args", {}), images=data.get("images"),
                      preprocess=preprocess, input=data.get("input"))


def _storage(data: str | dict[str, Any] | None) -> StorageSpec | None:
    path = ("storage",)
    if data is None:
        return None
    if isinstance(data, str):  # the schema allows only "journal"
        return StorageSpec(path=path, kind=data)
    return StorageSpec(path=path, kind="url", url_env=data["url_env"], artifacts=data.get("artifacts"),
                       heartbeat=data.get("heartbeat"), grace_period=data.get("grace_period"))


def _launch(data: list[str] | dict[str, Any] | None) -> LaunchSpec:
    path = ("output", "launch")
    if data is None:
        return LaunchSpec(path=path)
    if isinstance(data, list):  # names only: every option at its default
        k8s = KubernetesSpec(path=(*path, data.index("kubernetes"))) if "kubernetes" in data else None
        slurm = SlurmSpec(path=(*path, data.index("slurm"))) if "slurm" in data else None
        return LaunchSpec(path=path, kubernetes=k8s, slurm=slurm)
    k8s = KubernetesSpec(path=(*path, "kubernetes"), **data["kubernetes"]) if "kubernetes" in data else None
    slurm = SlurmSpec(path=(*path, "slurm"), **data["slurm"]) if "slurm" in data else None
    return LaunchSpec(path=path, kubernetes=k8s, slurm=slurm)


def _as_written(cls: type[T], written: dict[str, Any], path: YamlPath, /, **converted: Any) -> T:
    """A section's schema-valid data in; its dataclass out: each field named like a key takes the value as written,
    a key not written keeps the field's default (declared once, on the dataclass), `converted` gives the rest."""
    names = {f.name for f in dataclasses.fields(cls)} - {"path"} - converted.keys()
    return cls(path=path, **{name: written[name] for name in names if name in written}, **converted)


def build(data: dict[str, Any], file: Path, text: str) -> Spec:
    """Schema-valid spec data in, a Spec out (a default is its dataclass field's, or given here where the data is
    converted)."""
    ev = data.get("evaluation", {})
    evaluation = _as_written(EvaluationSpec, ev, ("evaluation",),
                             metric=ev.get("metric", None if "evaluator" in ev else "L2"),
                             data=_reader(ev["data"], ("evaluation", "data")) if "data" in ev else None)
    s = data["search"]
    search = _as_written(SearchSpec, s, ("search",),
                         objectives=tuple(s["objectives"]) if "objectives" in s else None,
                         stop=StopSpec(path=("search", "stop"), **s["stop"]) if "stop" in s else None)
    o = data.get("output", {})
    output = _as_written(OutputSpec, o, ("output",), launch=_launch(o.get("launch")))
    k = data.get("keep_float", {})
    keep_float = _as_written(KeepFloatSpec, k, ("keep_float",), nodes=tuple(k.get("nodes", ())),
                             op_types=tuple(k.get("op_types", ())),
                             subgraphs=tuple(tuple(pair) for pair in k.get("subgraphs", ())))
    return Spec(file=file, text=text, name=data["name"], model=data["model"],
                calibration=_reader(data["calibration"], ("calibration",)), evaluation=evaluation,
                search=search, device=data["device"], output=output, keep_float=keep_float,
                storage=_storage(data.get("storage")))
