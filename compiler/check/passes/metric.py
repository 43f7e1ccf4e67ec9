"""Metric/direction pass: Spec in; QAS501-504 out. `resolved.direction` derives the objective's direction.

Built-in distances (L2, L1) minimize; cos, psnr and ssim maximize, and Quark's grid stage always
takes the minimum (QUARK-FACTS F5), so when Quark's own loop runs the search (engine autosearchpro)
they cannot use Grid or two-stage search. A user evaluator is always minimized as `baseline - score`
by Quark (F6): the script orients the score so that this is right for `higher_is_better` either way.

top1 and top5 are a classifier's accuracy against `evaluation.labels`; the value a trial records is
the drop from the float model's accuracy, which is minimized, so a minimum-taking grid stage picks the
best model and Grid and two-stage are fine. Quark's AutoSearchPro has no such metric (its
`search_metric` takes L1, L2, cos, psnr, ssim only), so engine autosearchpro refuses them (QAS503).
The labels are checked against what compile can know: their count against the evaluation samples',
the array name against each .npz sample, the model's single output and (top5) its class count.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from compiler.check.images import image_files
from compiler.check.intake_facts import analysis
from compiler.check.resolved import (
    MAXIMIZED_METRICS,
    TASK_METRICS,
    engine,
    labels_is_file,
    quark_runs_search,
    spec_path,
    two_stage,
)
from compiler.check.samples import read_headers, sample_files
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec
from compiler.runtime.contract import TASK_METRICS as TOP_K

MAX_LABELS_JSON_BYTES = 64 * 1024 * 1024  # a labels list is small; refuse to parse a huge file at compile time


def check(spec: Spec) -> Iterator[Diagnostic]:
    metric = spec.evaluation.metric
    if metric in TASK_METRICS or spec.evaluation.labels is not None:
        yield from _task_metric(spec)
        return
    if metric not in MAXIMIZED_METRICS or not quark_runs_search(engine(spec)):  # qas's own loop ranks by direction
        return
    if spec.search.sampler == "Grid":
        yield diag("QAS501", f"metric {metric} is maximized, but Quark's Grid search always keeps the minimum "
                             "and would select the worst model", (*spec.search.path, "sampler"),
                   hint="use sampler TPE (or Random), or metric L2/L1")
    elif two_stage(spec):
        where = (*spec.search.path, "two_stage") if spec.search.two_stage is not None else (*spec.search.path, "preset")
        yield diag("QAS501", f"metric {metric} is maximized, but the grid stage of two-stage search always keeps "
                             "the minimum and would select the worst calibration", where,
                   hint="set search.two_stage: false, or use metric L2/L1")


def _task_metric(spec: Spec) -> Iterator[Diagnostic]:
    ev = spec.evaluation
    metric, labels = ev.metric, ev.labels
    if metric not in TASK_METRICS:
        shown = f"metric {metric}" if metric is not None else f"evaluator {ev.evaluator}"
        yield diag("QAS502", f"labels are for metric top1 or top5, but {shown} takes none", (*ev.path, "labels"),
                   hint="write metric: top1 (or top5) to score against the labels, or drop labels", at_key=True)
        return
    if labels is None:
        yield diag("QAS502", f"metric {metric} scores a classifier against labels, but evaluation.labels is missing",
                   (*ev.path, "metric"),
                   hint="labels: the name of an array in every .npz sample (e.g. label), or a .npy or .json file "
                        "with one class index per sample")
        return
    if quark_runs_search(engine(spec)):
        yield diag("QAS503", f"metric {metric} is computed by qas's own search loop; Quark's AutoSearchPro "
                             "evaluates only L1, L2, cos, psnr and ssim", (*ev.path, "metric"),
                   hint="use engine qas (the default), or write an evaluator (evaluator: evals.py:top1, "
                        "higher_is_better: true)")
        return
    yield from _model_output(spec, metric)
    yield from _labels_fit(spec, labels)


def _model_output(spec: Spec, metric: str) -> Iterator[Diagnostic]:
    outputs = analysis(spec)["outputs"]
    at = (*spec.evaluation.path, "metric")
    if len(outputs) != 1:
        yield diag("QAS504", f"metric {metric} reads one output of class scores, but the model has {len(outputs)} "
                             f"({', '.join(o['name'] for o in outputs)})", at,
                   hint="score a model with several outputs with an evaluator (evaluator: evals.py:fn)")
        return
    shape = outputs[0]["shape"]
    classes = shape[-1] if shape else None
    k = TOP_K[metric]
    if isinstance(classes, int) and 0 < classes <= k - 1 + (k == 1):  # top1 needs 2 classes, top5 at least 5
        yield diag("QAS504", f"metric {metric} needs at least {max(k, 2)} classes, but output {outputs[0]['name']!r} "
                             f"has shape {shape} ({classes} along its last axis)", at,
                   hint="use top1" if k > 1 and classes > 1 else "score the model with an evaluator")


def _labels_fit(spec: Spec, labels: str) -> Iterator[Diagnostic]:
    ev = spec.evaluation
    at = (*ev.path, "labels")
    reader = ev.data if ev.data is not None else spec.calibration
    where = "evaluation.data" if ev.data is not None else "calibration (the evaluation samples)"
    if not labels_is_file(labels):
        if reader.folder is None:
            yield diag("QAS504", f"labels {labels!r} names an array of .npz samples, but {where} is not a sample "
                                 "folder", at, hint="write the labels to a .npy or .json file, one per sample")
            return
        inputs = {i["name"] for i in analysis(spec)["inputs"]}
        if labels in inputs:
            yield diag("QAS504", f"labels {labels!r} is a model input, not the labels", at,
                       hint="save the labels under another name in each .npz (e.g. label)")
            return
        for path in sample_files(spec_path(spec, reader.folder), reader.limit):
            try:
                headers = read_headers(path)
            except ValueError:
                continue  # the data pass reported it
            if labels not in headers:
                held = ", ".join(sorted(k for k in headers if k)) or "a single .npy array"
                yield diag("QAS504", f"sample {reader.folder + '/' + path.name!r} has no array {labels!r} "
                                     f"(it has {held})", at,
                           hint="save each sample with its label: np.savez(path, input=x, label=np.int64(k)), or "
                                "write the labels to a .npy or .json file")
                return
        return
    count, problem = _file_count(spec_path(spec, labels))
    if problem is not None:
        yield diag("QAS504", f"labels file {labels!r} {problem}", at,
                   hint="np.save(path, np.array([k0, k1, ...])) or a JSON list of integers, one per sample")
        return
    samples = _sample_count(spec, reader)
    if samples is not None and count != samples:
        yield diag("QAS504", f"labels file {labels!r} has {count} entries, but {where} has {samples} samples", at,
                   hint="one label per sample, in the samples' name order (limit counts too)")


def _file_count(path: Any) -> tuple[int, str | None]:
    """A .npy or .json labels file in; (its number of entries, None) or (0, why it cannot be used) out."""
    if not path.is_file():
        return 0, "does not exist"
    if path.suffix.lower() == ".npy":
        try:
            header = read_headers(path)[None]
        except ValueError as exc:
            return 0, f"cannot be read: {exc}"
        dtype, shape = header
        if not (dtype.startswith(("int", "uint"))) or not shape:
            return 0, f"holds {dtype} {list(shape)}: it must be integers with one entry (or row) per sample"
        return shape[0], None
    if path.stat().st_size > MAX_LABELS_JSON_BYTES:
        return 0, f"is over {MAX_LABELS_JSON_BYTES // 2**20} MiB"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return 0, f"is not valid JSON: {exc}"
    if not isinstance(data, list) or not all(_label_entry(e) for e in data):
        return 0, "must be a JSON list of integers (or of lists of integers, one list a batched sample)"
    return len(data), None


def _label_entry(entry: Any) -> bool:
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0
    return whole(entry) or (isinstance(entry, list) and bool(entry) and all(whole(v) for v in entry))


def _sample_count(spec: Spec, reader: Any) -> int | None:
    if reader.folder is not None:
        return len(sample_files(spec_path(spec, reader.folder), reader.limit))
    if reader.images is not None:
        return len(image_files(spec_path(spec, reader.images), reader.limit))
    return None  # a reader class: known only when it runs
