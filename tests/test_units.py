"""Unit tests of the small pieces: literals, locating YAML paths, did-you-mean, space arithmetic."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from compiler.back.literals import LiteralError, py_literal
from compiler.check.spacemath import count_configs, has_continuous, quark_discrete_size, with_device
from compiler.diagnostics import format_path
from compiler.front.source import load
from compiler.front.suggest import closest


@pytest.mark.parametrize("value", [None, True, 0, -3, 1.5e-06, "x'\"\n", [1, [2, "a"]], {"k": {"n": [None]}}, (1,), ()])
def test_literals_round_trip(value) -> None:
    text = py_literal(value)
    assert ast.literal_eval(text) == value
    assert type(ast.literal_eval(text)) is type(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, {1: "a"}, {"a": object()}, b"bytes", {"s": {1, 2}}])
def test_literals_refuse_what_has_no_safe_form(value) -> None:
    with pytest.raises(LiteralError):
        py_literal(value)


def test_literals_keep_bool_distinct_from_int() -> None:
    assert py_literal([True, 1]) == "[True, 1]"


def test_locate_points_at_keys_and_values(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("a:\n  b: [1, 2]\n  c: {d: x}\n")
    doc, found = load(spec)
    assert not found
    assert doc.locate(("a", "b", 1)) == (2, 10)
    assert doc.locate(("a", "c", "d"), at_key=True) == (3, 7)
    assert doc.locate(("a", "missing", "deeper")) == doc.locate(("a",))  # the deepest node that exists


def test_format_path_quotes_odd_keys() -> None:
    assert format_path(("search", "space", "a b", 0)) == '$.search.space["a b"][0]'


def test_closest_prefers_case_insensitive_matches() -> None:
    assert closest("minmse", ["MinMax", "MinMSE"]) == "MinMSE"
    assert closest("zzz", ["MinMax"]) is None


def test_space_arithmetic_on_a_conditional_space() -> None:
    space = {"a": [1, 2], "g": {"x": [1, 2, 3], "only_if": {"a": 1}},
             "h": {"y": {"type": "int", "low": 1, "high": 2}, "only_if": "a"}}
    assert quark_discrete_size(space) == 6  # Quark ignores the condition and the range
    assert has_continuous(space)
    assert count_configs({k: v for k, v in space.items() if k != "h"}) == 4  # a=1: 3, a=2: 1


def test_with_device_adds_missing_algorithm_groups_after_the_choice() -> None:
    out = with_device({"algorithms": ["adaround", None]}, "cpu")
    assert list(out) == ["algorithms", "adaround_params"]
    assert out["adaround_params"] == {"optim_device": ["cpu"], "infer_device": ["cpu"],
                                      "only_if": {"algorithms": "adaround"}}
