"""The keep_float search dimension: a trial and keep_float.search in; the searched choice ({"top_k": k},
{"coverage": f}, {"partitioned": [[start, width], ...]} or {"granular": [group index, ...]}) out, as Optuna parameters
like any other."""

from __future__ import annotations

from typing import Any

KEEP_FLOAT_PARAM = {"top_k": "keep_float_top_k", "coverage": "keep_float_coverage"}  # the Optuna parameter's name


DEFAULT_SECTIONS = 2  # strategy partitioned without `sections` (the schema's default)
GRANULAR_MAX_GROUPS = 32  # strategy granular: one parameter a group; beyond this the space is too large to search


def granular_param(index: int) -> str:
    return f"keep_float_g{index}"


def granular_starts(groups: int) -> list[dict[str, bool]]:
    """strategy granular's informed first trials, as fixed Optuna parameters: none kept, all kept, then the ranking's
    top 1, 2 and 4 (each once, within the group count)."""
    kept_counts = list(dict.fromkeys([0, groups, *(k for k in (1, 2, 4) if k < groups)]))
    return [{granular_param(i): i < kept for i in range(groups)} for kept in kept_counts]


def suggest_keep_float(trial: Any, search: dict[str, Any], groups: int = 0) -> dict[str, Any]:
    """The search dimension's Optuna parameters: {"top_k": k} from the declared list, {"coverage": f} in its range,
    or strategy partitioned: {"partitioned": [[start, width], ...]}, one span of the graph's topological order (as
    fractions of it) per section, each at most 1/sections wide: 2 x sections parameters whatever the model."""
    if search.get("strategy") == "granular":  # `groups`: the ranking's group count
        return {"granular": [i for i in range(groups) if trial.suggest_categorical(granular_param(i), [False, True])]}
    if search.get("strategy") == "partitioned":
        sections = int(search.get("sections", DEFAULT_SECTIONS))
        return {"partitioned": [[trial.suggest_float(f"keep_float_s{i}_start", 0.0, 1.0),
                                 trial.suggest_float(f"keep_float_s{i}_width", 0.0, 1.0 / sections)]
                                for i in range(sections)]}
    if "top_k" in search:
        return {"top_k": trial.suggest_categorical(KEEP_FLOAT_PARAM["top_k"], list(search["top_k"]))}
    low, high = search["coverage"]["low"], search["coverage"]["high"]
    return {"coverage": trial.suggest_float(KEEP_FLOAT_PARAM["coverage"], low, high)}
