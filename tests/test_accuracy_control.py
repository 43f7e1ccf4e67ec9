"""strategy accuracy_control's steps (compiler/runtime/accuracy_control.py) against oracles that say which kept sets are
within tolerance: the answer, how many quantizations reach the tolerance, and the bound compile counts."""

from __future__ import annotations

import math
import random

import pytest

from compiler.runtime.accuracy_control import Answer, Step, next_step, scored_steps, steps_bound


def run(sizes: list[int], within) -> tuple[Answer, list[Step]]:
    """Drive the strategy to its answer with `within(kept set) -> bool`; the answer and the steps asked for."""
    tested: dict[tuple[int, ...], bool] = {}
    asked = []
    while True:
        found = next_step(sizes, tested)
        if isinstance(found, Answer):
            return found, asked
        assert found.groups not in tested, "a step was asked for twice"
        asked.append(found)
        tested[found.groups] = within(set(found.groups))
        assert len(asked) <= steps_bound(len(sizes)), "more steps than compile counts"


def test_a_quantized_model_within_tolerance_is_the_answer_in_one_step() -> None:
    answer, asked = run([1] * 8, lambda kept: True)
    assert answer.groups == () and [s.phase for s in asked] == ["quantized"]


def test_the_bisection_finds_the_shortest_prefix_then_drops_what_is_not_needed() -> None:
    needed = {0, 2}  # groups 0 and 2 must stay float; 1 is not needed
    answer, asked = run([1] * 8, lambda kept: needed <= kept)
    assert answer.groups == (0, 2)
    first_within = next(k for k, s in enumerate(asked, 1) if needed <= set(s.groups))
    assert first_within <= math.ceil(math.log2(8)) + 3
    assert [s.phase for s in asked][:1] == ["quantized"] and {s.phase for s in asked} == {"quantized", "prefix", "drop"}


def test_the_most_expensive_group_is_dropped_first() -> None:
    sizes = [1, 5, 1, 1]  # group 1 has the most nodes
    answer, asked = run(sizes, lambda kept: {0, 2} <= kept)
    drops = [s for s in asked if s.phase == "drop"]
    assert drops[0].groups == (0, 2)  # group 1 tried first, and it was not needed
    assert answer.groups == (0, 2)


def test_no_prefix_within_tolerance_is_said_after_the_whole_ranking() -> None:
    answer, asked = run([1] * 5, lambda kept: False)
    assert answer.groups is None and "whole ranking" in answer.detail
    assert asked[-1].groups == (0, 1, 2, 3, 4) and len(asked) <= 1 + math.ceil(math.log2(5)) + 1


@pytest.mark.parametrize("count", [0, 1, 2])
def test_tiny_rankings_end(count: int) -> None:
    answer, asked = run([2] * count, lambda kept: len(kept) == count and count > 0)
    assert (answer.groups is None) == (count == 0)
    assert len(asked) <= steps_bound(count)


def test_any_monotone_oracle_reaches_a_minimal_answer_within_the_bound() -> None:
    rng = random.Random(7)
    for _ in range(300):
        count = rng.randint(1, 40)
        needed = {g for g in range(count) if rng.random() < 0.15}
        answer, asked = run([rng.randint(1, 6) for _ in range(count)], lambda kept, n=needed: n <= kept)
        assert set(answer.groups) == needed  # every unneeded group dropped, every needed one kept
        first = next(k for k, s in enumerate(asked, 1) if needed <= set(s.groups))
        assert first <= math.ceil(math.log2(count)) + 3 if count > 1 else first <= 2


def test_the_same_scored_steps_give_the_same_next_step() -> None:
    tested = {(): False, (0, 1, 2, 3): True}
    assert next_step([1] * 8, tested) == next_step([1] * 8, dict(tested)) == Step((0, 1), "prefix")


def test_scored_steps_read_complete_trials() -> None:
    class Trial:
        def __init__(self, groups, within) -> None:
            self.user_attrs = {"config": {"keep_float": {"groups": groups}}, "within_tolerance": within}

    found = scored_steps([Trial([], False), Trial([0, 1], True), Trial(None, None)], "within_tolerance", "config")
    assert found == {(): False, (0, 1): True}
