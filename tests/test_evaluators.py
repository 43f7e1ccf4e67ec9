"""User evaluators (issue 18.17), without amd-quark: an exception comes back naming the evaluator and its file:line,
with its traceback; a return that is not a finite real number is refused naming its type and repr; the evaluator's
module and the model path it gets are resolved paths; a user module that fails to import stops with its traceback."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest

from compiler.runtime.checks import SearchError
from compiler.runtime.readers import load_user_object
from compiler.runtime.scoring import EvaluatorError, make_evaluator

EVALS = r'''\
import math
import os
import numpy as np


def lookup(outputs, key):
    return outputs[key]


def raises(path):
    return lookup({"scores": 1.0}, "output 'dets'")


def returns(path):
    with open(os.path.join(os.path.dirname(__file__), "seen.txt"), "w") as seen:
        seen.write(__file__ + "\n" + path)
    return RETURNED


RETURNED = None
'''


def evaluator(folder: Path, function: str, returned: str = "None") -> tuple:
    """evals.py in `folder`/user, named from `folder`/out as `../user/evals.py` (as a compiled script names it)."""
    (folder / "user").mkdir(exist_ok=True)
    (folder / "out").mkdir(exist_ok=True)
    (folder / "user" / "evals.py").write_text(EVALS.replace("RETURNED = None", f"RETURNED = {returned}"))
    score = make_evaluator({"file": "../user/evals.py", "function": function, "higher_is_better": True},
                           folder / "out")
    return score, (folder / "user" / "evals.py").resolve()


def test_an_exception_names_the_evaluator_and_its_line_and_keeps_the_traceback(tmp_path: Path, capsys) -> None:
    score, file = evaluator(tmp_path, "raises")
    with pytest.raises(EvaluatorError) as raised:
        score(str(tmp_path / "out" / "q.onnx"))
    summary = str(raised.value)
    assert summary.startswith("evaluator evals.py:raises raised KeyError: \"output 'dets'\" ")
    assert f"at {file}:8 in lookup (scoring {tmp_path.resolve() / 'out' / 'q.onnx'})" in summary
    assert "\n" not in summary  # one line for the terminal; the traceback is in details, search.log and the trial
    details = raised.value.details
    assert details.startswith("\nTraceback (most recent call last):")
    assert f'File "{file}", line 12, in raises' in details and f'File "{file}", line 8, in lookup' in details
    assert details.endswith("KeyError: \"output 'dets'\"") and "scoring.py" not in details
    assert f"qas: {summary}\nTraceback" in capsys.readouterr().err  # stderr: search.log once output is routed
    again = pickle.loads(pickle.dumps(raised.value))  # a trial run in another process keeps both parts
    assert str(again) == summary and again.details == details


@pytest.mark.parametrize("returned, shown", [
    ("None", "NoneType None"), ("'0.75'", "str '0.75'"), ("True", "bool True"), ("np.bool_(False)", "bool np.False_"),
    ("[0.75]", "list [0.75]"), ("'x' * 500", "str 'xxxxxxx"), ("np.array([0.5, 0.7])", "ndarray array([0.5, 0.7])"),
])
def test_a_return_that_is_not_a_real_number_is_refused_naming_its_type_and_repr(tmp_path: Path, returned: str,
                                                                                shown: str) -> None:
    score, file = evaluator(tmp_path, "returns", returned)
    with pytest.raises(EvaluatorError) as refused:
        score(str(tmp_path / "out" / "q.onnx"))
    message = str(refused.value)
    assert message.startswith(f"evaluator evals.py:returns ({file}) returned {shown}"), message
    assert "it must return a real number (an int or a float; not a bool, a string or None)" in message
    assert len(message) < 400 + len(str(file)) + len(str(tmp_path))  # a long repr is cut


@pytest.mark.parametrize("returned", ["math.nan", "-math.inf", "np.float32('nan')"])
def test_a_non_finite_number_is_refused(tmp_path: Path, returned: str) -> None:
    score, _ = evaluator(tmp_path, "returns", returned)
    with pytest.raises(EvaluatorError, match="it must be a finite number"):
        score(str(tmp_path / "out" / "q.onnx"))


@pytest.mark.parametrize("returned, value", [("0.75", 0.75), ("3", 3.0), ("np.float32(0.5)", 0.5),
                                             ("np.array(0.25)", 0.25), ("np.int64(2)", 2.0)])
def test_real_numbers_and_numpy_scalars_are_taken(tmp_path: Path, returned: str, value: float) -> None:
    score, _ = evaluator(tmp_path, "returns", returned)
    assert score(str(tmp_path / "out" / "q.onnx")) == value and math.isfinite(value)


def test_the_evaluator_module_and_the_model_path_it_gets_are_resolved(tmp_path: Path) -> None:
    score, file = evaluator(tmp_path, "returns", "1.0")
    score(str(tmp_path / "out" / ".." / "out" / "q.onnx"))
    module_file, path = (file.parent / "seen.txt").read_text().split("\n")
    assert module_file == str(file) and ".." not in module_file
    assert path == str((tmp_path / "out" / "q.onnx").resolve())


def test_a_user_module_that_fails_to_import_stops_with_its_traceback(tmp_path: Path, capsys) -> None:
    (tmp_path / "readers.py").write_text("import json\n\nCONFIG = json.loads('{')\n")
    with pytest.raises(SearchError):
        load_user_object(tmp_path / "sub" / ".." / "readers.py", "Reader")
    err = capsys.readouterr().err
    file = (tmp_path / "readers.py").resolve()
    assert f"qas: error: importing {file} failed: JSONDecodeError: Expecting property name" in err
    assert f'File "{file}", line 3, in <module>' in err and "Traceback (most recent call last):" in err



GENERATOR = r'''\
import os

CLOSED = os.path.join(os.path.dirname(__file__), "closed.txt")


def per_sample(path):
    try:
        for value in (1.0, 2.0, 4.0, 8.0):
            yield value
    finally:
        with open(CLOSED, "a") as closed:
            closed.write("closed\n")


def breaks(path):
    yield 1.0
    raise RuntimeError("sample 2 is unreadable")


def silent(path):
    return
    yield
'''


def generator_evaluator(folder: Path, function: str, higher_is_better: bool = True) -> tuple:
    (folder / "user").mkdir(exist_ok=True)
    (folder / "out").mkdir(exist_ok=True)
    (folder / "user" / "gen.py").write_text(GENERATOR)
    score = make_evaluator({"file": "../user/gen.py", "function": function, "higher_is_better": higher_is_better},
                           folder / "out")
    return score, folder / "user" / "closed.txt"


def test_a_generator_evaluator_scores_the_mean_of_what_it_yields(tmp_path: Path) -> None:
    score, closed = generator_evaluator(tmp_path, "per_sample")
    assert score(str(tmp_path / "q.onnx")) == 3.75
    assert list(score.samples(str(tmp_path / "q.onnx"))) == [1.0, 2.0, 4.0, 8.0]
    lower, _ = generator_evaluator(tmp_path, "per_sample", higher_is_better=False)
    assert lower(str(tmp_path / "q.onnx")) == -3.75 and next(iter(lower.samples("q.onnx"))) == -1.0
    assert closed.read_text().count("closed") == 4  # each run of the generator, whole or not, closed


def test_a_generator_evaluators_errors_name_its_line_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    breaks, _ = generator_evaluator(tmp_path, "breaks")
    with pytest.raises(EvaluatorError, match=r"gen.py:breaks raised RuntimeError: sample 2 is unreadable at .*py:18"):
        breaks(str(tmp_path / "q.onnx"))
    silent, _ = generator_evaluator(tmp_path, "silent")
    with pytest.raises(EvaluatorError, match="yielded no score"):
        silent(str(tmp_path / "q.onnx"))


class Pruner:
    """A watch that stops the scoring after `after` samples and records what it was told."""

    order = None

    def __init__(self, after: int | None) -> None:
        self.after, self.told = after, []

    def __call__(self, index: int, value: float, remaining: int) -> None:
        self.told.append((index, value, remaining))
        if self.after is not None and len(self.told) >= self.after:
            raise RuntimeError("pruned")


def test_a_generator_evaluator_is_scored_sample_by_sample_to_the_same_value_and_closed_when_pruned(
        tmp_path: Path) -> None:
    from compiler.runtime.scoring import Scorer

    score, closed = generator_evaluator(tmp_path, "per_sample")
    scorer = Scorer(None, score, None, "cpu")
    scorer.score_float(tmp_path / "float.onnx")
    assert scorer.baseline == 3.75 and scorer.sample_count == 4
    whole = scorer.score(tmp_path / "q.onnx")
    watch = Pruner(None)
    assert scorer.score(tmp_path / "q.onnx", watch) == whole == 0.0
    assert watch.told == [(0, -1.0, 3), (1, -2.0, 2), (2, -4.0, 1), (3, -8.0, 0)]  # losses: lower is better
    before = closed.read_text().count("closed")
    with pytest.raises(RuntimeError, match="pruned"):
        scorer.score(tmp_path / "q.onnx", Pruner(2))
    assert closed.read_text().count("closed") == before + 1  # the evaluator's finally ran at the prune

    plain = Scorer(None, evaluator(tmp_path, "returns", "0.5")[0], None, "cpu")
    plain.baseline = 1.0
    with pytest.raises(ValueError, match="returns one score a model"):
        plain.score(tmp_path / "q.onnx", Pruner(None))
