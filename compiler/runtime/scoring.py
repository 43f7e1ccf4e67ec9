"""Scoring: a quantized model's path in; its objective value out (the user evaluator, or a Quark metric against the
float outputs)."""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import contract
from .readers import load_user_object
from .stopping import TrialTimeout
from .workers import CPUS_ENV

SHOWN_CHARS = 120  # of a wrong return value's repr, in the message
TRACEBACK_CHARS = 8000  # of an evaluator's traceback, in the trial's error (its end: the innermost frames)


class EvaluatorError(Exception):
    """The user's evaluator raised, or returned no real number: str() is one line naming the evaluator and what went
    wrong, `details` the evaluator's traceback ("" for a wrong return). Both are args, so it pickles whole."""

    def __init__(self, summary: str, details: str = "") -> None:
        super().__init__(summary, details)

    def __str__(self) -> str:
        return self.args[0]

    @property
    def details(self) -> str:
        """The traceback, each line after a newline (appended to the one-line summary where it is recorded)."""
        return self.args[1]


def make_evaluator(evaluator: dict[str, Any] | None, here: Path) -> Callable[[str], float] | None:
    """The user's evaluator, oriented so that the minimized `baseline - score` is right for either direction (F6).

    It is called with the model's resolved path; what it raises comes back as EvaluatorError with its traceback
    (also written to stderr: search.log once output is routed), and what it returns must be a finite real number.
    A generator function (it yields one score per evaluation sample) is scored by the mean of what it yields, and the
    returned callable then has `samples(model_path)`: the oriented per-sample scores, one at a time (search.prune)."""
    if evaluator is None:
        return None
    file = (here / evaluator["file"]).resolve()
    user_function = load_user_object(file, evaluator["function"])
    name = f"{file.name}:{evaluator['function']}"  # as the spec names it; the messages add the resolved path
    shown = f"{name} ({file})"
    sign = 1.0 if evaluator["higher_is_better"] else -1.0

    def call(model: str) -> Any:
        try:
            return user_function(model)
        except TrialTimeout:  # search.trial_timeout, landed in the evaluator: the trial's, not the evaluator's
            raise
        except Exception as error:
            raise raised_error(name, file, model, error) from error

    if not inspect.isgeneratorfunction(user_function):
        def oriented_score(model_path: str) -> float:
            model = str(Path(model_path).resolve())
            return sign * real_number(shown, model, call(model))

        return oriented_score

    def samples(model_path: str) -> Iterator[float]:
        """The oriented score of each sample, as the evaluator yields them."""
        model = str(Path(model_path).resolve())
        generator = call(model)
        try:
            while True:
                try:
                    returned = next(generator)
                except StopIteration:
                    return
                except TrialTimeout:
                    raise
                except Exception as error:
                    raise raised_error(name, file, model, error) from error
                yield sign * real_number(shown, model, returned)
        finally:
            generator.close()  # pruned: the evaluator's own clean-up (a with block, a finally) runs now

    def mean_score(model_path: str) -> float:
        return sample_mean(list(samples(model_path)), shown)

    mean_score.samples = samples  # type: ignore[attr-defined]
    mean_score.mean = functools.partial(sample_mean, shown=shown)  # type: ignore[attr-defined]
    return mean_score


def sample_mean(values: list[float], shown: str) -> float:
    """A generator evaluator's per-sample scores in; their mean out (one formula for whole and pruned scoring)."""
    if not values:
        raise EvaluatorError(f"evaluator {shown} yielded no score: a generator evaluator yields one score a sample")
    return math.fsum(values) / len(values)


def raised_error(name: str, file: Path, model: str, error: BaseException) -> EvaluatorError:
    """What the evaluator raised in; an EvaluatorError whose summary says where (file:line) and whose details hold the
    traceback from the evaluator's own frame on, written to stderr as well."""
    frames = traceback.extract_tb(error.__traceback__)[1:]  # [0] is oriented_score's call
    own = [f for f in frames if f.filename == str(file)] or frames  # the deepest line of the evaluator's file
    where = f" at {own[-1].filename}:{own[-1].lineno} in {own[-1].name}" if own else ""
    summary = f"evaluator {name} raised {type(error).__name__}: {error}{where} (scoring {model})"
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next)).rstrip("\n")
    if len(trace) > TRACEBACK_CHARS:
        trace = "... (traceback cut to its end)\n" + trace[-TRACEBACK_CHARS:]
    print(f"qas: {summary}\n{trace}", file=sys.stderr, flush=True)
    return EvaluatorError(summary, "\n" + trace)


def real_number(name: str, model: str, returned: Any) -> float:
    """What the evaluator returned in; it as a finite float out (a numpy or torch scalar counts), else EvaluatorError
    naming its type and repr: bool, str, None, NaN and infinities are refused, never converted."""
    value = returned
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):  # numpy / torch 0-d scalar
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number):
            return number
        problem = "it must be a finite number"
    else:
        problem = "it must return a real number (an int or a float; not a bool, a string or None)"
    try:
        shown = repr(returned)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the message
        shown = "<no repr>"
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS - 3] + "..."
    raise EvaluatorError(f"evaluator {name} returned {type(returned).__name__} {shown} for {model}: {problem}")


def load_labels(labels: dict[str, Any] | None, here: Path, eval_source: dict[str, Any]) -> list[Any] | None:
    """Settings.labels (paths relative to `here`) and the evaluation reader's description in; one int64 array of
    class indices per evaluation sample, in the samples' order, out (None without labels)."""
    if labels is None:
        return None
    import json

    import numpy as np

    from .readers import sample_paths

    if "array" in labels:  # an array of each .npz sample, read in the order (and limit) the folder reader uses
        found = []
        for path in sample_paths(here / eval_source["folder"], eval_source["limit"]):
            with np.load(path) as arrays:
                if labels["array"] not in arrays.files:
                    raise ValueError(f"{path} has no labels array {labels['array']!r}")
                found.append(arrays[labels["array"]])
    else:
        file = here / labels["file"]
        found = list(np.load(file)) if file.suffix.lower() == ".npy" else json.loads(file.read_text(encoding="utf-8"))
    return [np.asarray(entry, dtype=np.int64).reshape(-1) for entry in found]


def top_k_accuracy(rows: list[tuple[Any, Any]], k: int) -> float:
    """(output, labels) per sample in: the class scores (last axis: classes; the rest: a batch) and one class index
    per row; the fraction of rows whose label is among the k highest scores out."""
    import numpy as np

    hits = total = 0
    for number, (output, labels) in enumerate(rows):
        scores = output.reshape(-1, output.shape[-1])
        if len(scores) != len(labels):
            raise ValueError(f"evaluation sample {number} gives {len(scores)} rows of class scores "
                             f"(output shape {list(output.shape)}) but has {len(labels)} labels")
        best = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        hits += int((best == labels[:, np.newaxis]).any(axis=1).sum())
        total += len(labels)
    return hits / total


class Scorer:
    """Scores models against the float model: the oriented user evaluator as baseline - score, top1/top5 as the
    float model's accuracy minus the quantized model's (the drop), or a Quark metric of the outputs."""

    def __init__(self, metric: str | None, evaluator: Callable[[str], float] | None, eval_reader: Any,
                 device: str, labels: list[Any] | None = None) -> None:
        self.metric = metric
        self.evaluator = evaluator
        self.eval_reader = eval_reader
        self.device = device
        self.labels = labels
        self.baseline: Any = None
        self.sample_count: int | None = None  # a generator evaluator: the scores the float model's scoring yielded

    @property
    def float_score(self) -> float | None:
        """The float model's score as a user would read it (the evaluator's own return, the accuracy for top1/top5);
        None for a distance metric, whose baseline is the float outputs."""
        if self.metric in contract.TASK_METRICS:
            return self.baseline
        return None

    def accuracy(self, model_path: Path) -> float:
        """top1/top5: the model's accuracy over the evaluation samples against the labels."""
        if self.labels is None:
            raise ValueError(f"metric {self.metric} needs labels")
        runs = self.runs(model_path)
        if len(runs) != len(self.labels):
            raise ValueError(f"{len(runs)} evaluation samples but {len(self.labels)} labels")
        return top_k_accuracy([(outputs[0], labels) for outputs, labels in zip(runs, self.labels, strict=True)],
                              contract.TASK_METRICS[self.metric])

    def outputs(self, model_path: Path) -> list[Any]:
        """Every evaluation sample's outputs, flattened into one vector a sample (Quark's custom ops registered)."""
        import numpy as np

        return [np.concatenate([o.reshape(-1) for o in outputs]) for outputs in self.runs(model_path)]

    def runs(self, model_path: Path) -> list[list[Any]]:
        """Every evaluation sample's outputs as the session returns them (Quark's custom ops registered)."""
        session = self.session(model_path)
        found = [session.run(None, sample) for sample in self.samples()]
        if not found:
            raise ValueError("the evaluation reader gave no samples")
        return found

    def session(self, model_path: Path) -> Any:
        """An onnxruntime session of the model on the device, Quark's custom ops registered."""
        import onnxruntime
        from quark.onnx.operators.custom_ops import get_library_path
        from quark.onnx.utils.model_utils import create_infer_session_for_onnx_model

        kind = self.device.split(":")[0]
        options = onnxruntime.SessionOptions()
        threads = os.environ.get(CPUS_ENV)  # a worker of several on this machine: its share of the cores
        if threads:
            options.intra_op_num_threads = len(threads.split(","))
        options.register_custom_ops_library(get_library_path(kind.upper()))
        return create_infer_session_for_onnx_model(str(model_path), options, providers=contract.PROVIDERS[kind])

    def samples(self) -> list[dict[str, Any]]:
        """The evaluation samples, in the reader's order."""
        self.eval_reader.reset_iter()
        return list(self.eval_reader)

    def score_float(self, model_path: Path) -> None:
        """Score the float model once: the baseline every quantized model is compared with."""
        samples = getattr(self.evaluator, "samples", None)
        if samples is not None:  # a generator evaluator: its mean, as evaluator() gives it, and how many it yields
            values = list(samples(str(model_path)))
            self.baseline, self.sample_count = self.evaluator.mean(values), len(values)
        elif self.evaluator is not None:
            self.baseline = self.evaluator(str(model_path))
        elif self.metric in contract.TASK_METRICS:
            self.baseline = self.accuracy(model_path)
        else:
            self.baseline = self.outputs(model_path)

    def score(self, model_path: Path, watch: Callable[[int, float, int], None] | None = None) -> float:
        """A quantized model in; its finite objective value out (raises ValueError otherwise). With `watch`
        (search.prune, built-in metrics): scored sample by sample in watch.order, each sample's value told to
        watch(index, value, remaining), which may stop the scoring by raising; the value is the same as without it."""
        if watch is not None:
            return self.score_by_sample(model_path, watch)
        if self.evaluator is not None:
            value = self.baseline - self.evaluator(str(model_path))
        elif self.metric in contract.TASK_METRICS:
            value = self.baseline - self.accuracy(model_path)  # the drop: minimized, as a user evaluator's (F6)
        else:
            import numpy as np
            from quark.onnx.quantization.auto_search.auto_search_pro import METRICS

            pairs = zip(self.baseline, self.outputs(model_path), strict=True)
            value = float(np.mean([METRICS[self.metric](fp, q) for fp, q in pairs]))
        if not math.isfinite(value):
            raise ValueError(f"the score of {model_path.name} is {value}")
        return float(value)

    def score_by_sample(self, model_path: Path, watch: Any) -> float:
        """score() sample by sample: each sample's value (its metric against the float outputs, or 1 - its top-k hit
        rate) told to `watch` in watch.order (None: the reader's order); the value is computed from the samples in the
        reader's order, as score() computes it, so it is the same to the last bit."""
        import numpy as np

        if self.evaluator is not None:
            return self.evaluator_by_sample(model_path, watch)
        session, samples = self.session(model_path), self.samples()
        if not samples:
            raise ValueError("the evaluation reader gave no samples")
        outputs: dict[int, Any] = {}
        values: dict[int, Any] = {}  # as the metric returned them: the mean is then score()'s to the last bit
        # the study's order, unless the evaluation samples are not those it was made from (then the reader's)
        order = watch.order if sorted(watch.order or []) == list(range(len(samples))) else range(len(samples))
        for position, index in enumerate(order):
            outputs[index] = session.run(None, samples[index])
            values[index] = self.sample_value(index, outputs[index])
            watch(index, float(values[index]), len(order) - position - 1)
        ordered = range(len(samples))
        if self.metric in contract.TASK_METRICS:
            if self.labels is None or len(self.labels) != len(samples):
                raise ValueError(f"metric {self.metric} needs one label entry per evaluation sample")
            rows = [(outputs[i][0], self.labels[i]) for i in ordered]
            value = self.baseline - top_k_accuracy(rows, contract.TASK_METRICS[self.metric])
        else:
            value = float(np.mean([values[i] for i in ordered]))
        if not math.isfinite(value):
            raise ValueError(f"the score of {model_path.name} is {value}")
        return float(value)

    def evaluator_by_sample(self, model_path: Path, watch: Any) -> float:
        """A generator evaluator's scores told to `watch` as it yields them (its own order; the loss, -score, so lower
        is better as the study minimizes), the generator closed when watch stops the scoring; score()'s value out."""
        import contextlib

        samples = getattr(self.evaluator, "samples", None)
        if samples is None:
            raise ValueError("this evaluator returns one score a model; only one that yields a score a sample can be "
                             "scored sample by sample")
        values: list[float] = []
        with contextlib.closing(samples(str(model_path))) as scores:
            for score in scores:
                values.append(score)
                remaining = self.sample_count - len(values) if self.sample_count is not None else 1
                watch(len(values) - 1, -score, max(remaining, 0))
        value = self.baseline - self.evaluator.mean(values)
        if not math.isfinite(value):
            raise ValueError(f"the score of {model_path.name} is {value}")
        return float(value)

    def sample_value(self, index: int, outputs: list[Any]) -> Any:
        """One evaluation sample's outputs in; its value (as the metric returns it) out, oriented as the search's
        (top1/top5: 1 - hit rate)."""
        import numpy as np

        if self.metric in contract.TASK_METRICS:
            return 1.0 - top_k_accuracy([(outputs[0], self.labels[index])], contract.TASK_METRICS[self.metric])
        from quark.onnx.quantization.auto_search.auto_search_pro import METRICS

        return METRICS[self.metric](self.baseline[index], np.concatenate([o.reshape(-1) for o in outputs]))
