"""Ranking: per-sample error drops of each candidate in; groups ranked by a robust score with a noise estimate, and
the prefix of that ranking a trial keeps in float, out.

A candidate's score is the trimmed mean of its per-sample drops (baseline error minus the error with it in float;
a fifth of the samples cut at each end), so one borderline sample cannot carry it. Its noise is read from a seeded
bootstrap over the samples: how far the score falls in the worst 5 % of resamples. A group whose score does not stay
above zero there (score <= noise) is marked `above_noise: false`, ranked after the others and never counted by a
coverage choice. Standard library at import time (numpy inside the functions).
"""

from __future__ import annotations

from typing import Any

from .patterns import block_pattern

AGGREGATES = ("sum", "max", "mean")
TRIM = 0.2  # the fraction cut at each end of the per-sample drops
BOOTSTRAP = 200  # resamples for the noise estimate
SEED = 0


def block_of(nodes: list[str], compiled: list[tuple[str, list[Any]]]) -> str | None:
    """The first block with a pattern found in one of a candidate's float node names (RE2 search), or None."""
    return next((b for b, patterns in compiled if any(p.search(n) for p in patterns for n in nodes)), None)


def group_nodes(candidates: dict[str, list[str]], blocks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Candidates {name: float nodes} (graph order) and blocks {name: [regex]} in; {group: [candidate names]} out, in
    order of first candidate. A candidate joins the first block that matches one of its nodes; else it is a group."""
    compiled = [(block, [block_pattern(p) for p in patterns]) for block, patterns in blocks.items()]
    groups: dict[str, list[str]] = {}
    for name, nodes in candidates.items():
        groups.setdefault(block_of(nodes, compiled) or name, []).append(name)
    return groups


def robust(values: Any, axis: int = -1) -> Any:
    """The trimmed mean of per-sample values along `axis` (the median of 3 or 4 samples, the mean of 1 or 2)."""
    import numpy as np

    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    cut = max(1, int(TRIM * n)) if n >= 3 else 0
    return np.take(values, range(cut, n - cut), axis=axis).mean(axis=axis)


def _combine(aggregate: str, scores: Any) -> Any:
    """Candidates' scores (last axis) in; the group's score by sum, max or mean out."""
    return {"sum": scores.sum, "max": scores.max, "mean": scores.mean}[aggregate](axis=-1)


def rank(candidates: dict[str, dict[str, Any]], blocks: dict[str, list[str]], aggregate: str) -> list[dict[str, Any]]:
    """Candidates {name: {"nodes": [float nodes], "drops": [per sample]}} in; groups [{name, candidates, nodes,
    score, noise, above_noise, separated}] out: above-noise groups first, each part most sensitive first (ties by
    name). `separated`: the group beats the next one in at least 95 % of the bootstrap resamples."""
    import numpy as np

    if not candidates:
        return []
    names = list(candidates)
    drops = np.array([candidates[n]["drops"] for n in names], dtype=np.float64)  # candidates x samples
    samples = drops.shape[1]
    resampled = np.random.default_rng(SEED).integers(0, samples, size=(BOOTSTRAP, samples))
    replicas = robust(drops[:, resampled], axis=-1)  # candidates x BOOTSTRAP
    scores = robust(drops, axis=-1)
    index = {n: k for k, n in enumerate(names)}
    groups = []
    for group, members in group_nodes({n: candidates[n]["nodes"] for n in names}, blocks).items():
        rows = [index[m] for m in members]
        score = float(_combine(aggregate, scores[rows]))
        spread = _combine(aggregate, replicas[rows].T)  # BOOTSTRAP group scores
        low = float(np.percentile(spread, 5))  # the score in the worst 5 % of resamples
        groups.append({"name": group, "candidates": members,
                       "nodes": [n for m in members for n in candidates[m]["nodes"]],
                       "score": score, "noise": max(score - low, 0.0), "above_noise": low > 0, "_spread": spread})
    groups.sort(key=lambda g: (not g["above_noise"], -g["score"], g["name"]))
    for here, after in zip(groups, [*groups[1:], None], strict=True):
        here["separated"] = after is None or bool(np.mean(here["_spread"] > after["_spread"]) >= 0.95)
    for g in groups:
        del g["_spread"]
    return groups


def resolved(groups: list[dict[str, Any]]) -> int:
    """How many leading groups are above their noise and in an order the samples support."""
    count = 0
    for group in groups:
        if not group["above_noise"]:
            break
        count += 1
        if not group["separated"]:
            break
    return count


class Ranking:
    """The ranked groups of sensitivity.json; a search choice ({"top_k": k} | {"coverage": f} | {"partitioned":
    [[start, width], ...]} | {"granular" or "groups": [group index, ...]}) in, the groups kept float out. `order`: the
    float model's node names in its topological order (what partitioned spans are fractions of)."""

    def __init__(self, groups: list[dict[str, Any]], order: list[str] | None = None) -> None:
        self.groups = groups
        self.position = {name: k / max(len(order), 1) for k, name in enumerate(order or [])}

    def prefix(self, choice: dict[str, Any] | None) -> list[dict[str, Any]]:
        """top_k: the k first groups; coverage: the fewest first groups whose scores reach that fraction of the total
        score above the noise (0: none; groups within their noise never count)."""
        if not choice:
            return []
        if "top_k" in choice:
            return self.groups[:int(choice["top_k"])]
        if "partitioned" in choice:
            return self.in_spans(choice["partitioned"])
        if "granular" in choice or "groups" in choice:  # accuracy_control's steps name their groups as granular does
            return [self.groups[i] for i in choice.get("granular", choice.get("groups")) if 0 <= i < len(self.groups)]
        counted = [g for g in self.groups if g.get("above_noise", True) and g["score"] > 0]
        target = float(choice["coverage"]) * sum(g["score"] for g in counted)
        taken, covered = [], 0.0
        for group in counted:
            if covered >= target:
                break
            taken.append(group)
            covered += group["score"]
        return taken

    def in_spans(self, spans: list[list[float]]) -> list[dict[str, Any]]:
        """strategy partitioned: the groups whose first node in the graph's order falls in a [start, start + width)
        span (positions are fractions of the node count), in ranking order."""
        def first(group: dict[str, Any]) -> float | None:
            found = [self.position[n] for n in group["nodes"] if n in self.position]
            return min(found) if found else None

        return [g for g in self.groups if (p := first(g)) is not None
                and any(start <= p < start + width for start, width in spans)]

    def float_nodes(self, choice: dict[str, Any] | None) -> dict[str, Any]:
        """A choice in; {"choice", "groups", "nodes"} out: what a trial keeps in float beyond the fixed keep_float
        (the float model's node names, each once)."""
        taken = self.prefix(choice)
        nodes = list(dict.fromkeys(n for g in taken for n in g["nodes"]))
        return {"choice": choice, "groups": [g["name"] for g in taken], "nodes": nodes}
