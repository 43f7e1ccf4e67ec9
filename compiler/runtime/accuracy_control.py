"""keep_float.search strategy accuracy_control: the ranking's group sizes and the steps already scored in; the next
set of groups to keep in float (or the proven answer) out. A pure function of the study, so a resumed search or
another worker computes the same next step.

The steps, cheapest first:
1. the fully quantized model (nothing kept float); within tolerance: that is the answer;
2. bisection over the ranking's prefixes (keep its first k groups float) for the shortest prefix within tolerance,
   assuming a longer prefix is never worse; the whole ranking is tried only when the bisection reaches it;
3. each group of that prefix dropped once, the most expensive (most nodes) first, the drop kept when the model stays
   within tolerance. A drop whose set lies inside a set already outside tolerance is not tried (the same
   assumption).
About ceil(log2(groups)) + 2 quantizations reach the tolerance; the drops add at most one a kept group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STEP_ATTR = "accuracy_control"  # a trial's step: {"phase", "groups"} (the record the report lists)
PHASES = ("quantized", "prefix", "drop")


@dataclass(frozen=True)
class Step:
    """One quantization to run: the groups (ranking indices, ascending) kept float and the phase that asks for it."""

    groups: tuple[int, ...]
    phase: str


@dataclass(frozen=True)
class Answer:
    """The proven end: the groups kept float in the smallest set found within tolerance (None: even the whole ranking
    kept float is outside it) and why."""

    groups: tuple[int, ...] | None
    detail: str


def prefix(k: int) -> tuple[int, ...]:
    return tuple(range(k))


def next_step(sizes: list[int], tested: dict[tuple[int, ...], bool]) -> Step | Answer:
    """`sizes`: each ranked group's node count, most sensitive first; `tested`: kept groups -> within tolerance, for
    every step scored so far. The next step, or the answer once it is proven."""
    count = len(sizes)
    if () not in tested:
        return Step((), "quantized")
    if tested[()]:
        return Answer((), "the fully quantized model is within tolerance: nothing needs to stay float")
    low, high, high_known = 0, count, False  # prefix `low` is outside tolerance; `high` within once known
    while high - low > 1:
        middle = (low + high) // 2
        if prefix(middle) not in tested:
            return Step(prefix(middle), "prefix")
        if tested[prefix(middle)]:
            high, high_known = middle, True
        else:
            low = middle
    if not high_known:
        if count == 0:
            return Answer(None, "the ranking has no group to keep float, and the quantized model is outside tolerance")
        if prefix(count) not in tested:
            return Step(prefix(count), "prefix")
        if not tested[prefix(count)]:
            return Answer(None, f"even the whole ranking ({count} groups) kept float is outside tolerance")
    return _drops(sizes, high, tested)


def _drops(sizes: list[int], k: int, tested: dict[tuple[int, ...], bool]) -> Step | Answer:
    """Phase 3 from the shortest prefix within tolerance, `k` groups long."""
    current = set(prefix(k))
    failing = [set(kept) for kept, within in tested.items() if not within]
    for group in sorted(range(k), key=lambda g: (-sizes[g], -g)):  # the most nodes first; ties: the least sensitive
        candidate = tuple(sorted(current - {group}))
        if candidate in tested:
            if tested[candidate]:
                current.discard(group)
            continue
        if any(set(candidate) <= kept for kept in failing):
            continue
        return Step(candidate, "drop")
    nodes = sum(sizes[g] for g in current)
    shown = ", ".join(f"#{g + 1}" for g in sorted(current))
    return Answer(tuple(sorted(current)), f"keeping group(s) {shown} ({nodes} node(s)) float is within tolerance; "
                                          f"the shortest prefix within it was the first {k}, and no kept group can "
                                          "be dropped")


def steps_bound(groups: int) -> int:
    """The most quantizations the strategy can ask for with this many groups: the quantized model, the bisection
    (and the whole ranking) and one drop a group."""
    return 1 + max(groups - 1, 0).bit_length() + 1 + groups


def scored_steps(trials: list[Any], within_attr: str, config_attr: str) -> dict[tuple[int, ...], bool]:
    """The complete trials' steps: kept groups -> within tolerance (a trial answered from the study counts once)."""
    out: dict[tuple[int, ...], bool] = {}
    for trial in trials:
        choice = (trial.user_attrs.get(config_attr) or {}).get("keep_float") or {}
        within = trial.user_attrs.get(within_attr)
        if "groups" in choice and within is not None:
            out[tuple(sorted(choice["groups"]))] = bool(within)
    return out
