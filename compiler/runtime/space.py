"""Quark's search-space grammar at run time: a space (and a trial or a grid winner) in; configurations and stage
spaces out.

Shared by both engines, so they draw the same configurations for the same space, seed and budget.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from . import contract


def suggest_config(trial: Any, space: dict[str, Any]) -> dict[str, Any]:
    """Quark's own suggestion order and names (AutoSearchPro.run's suggest_params): a nested config out."""
    params: dict[str, Any] = {}
    for key, value in space.items():
        if isinstance(value, dict) and "only_if" in value:
            if not _condition_holds(value["only_if"], params):
                continue
            inner: dict[str, Any] = {}
            for sub, choice in value.items():
                if sub == "only_if":
                    continue
                name = f"{key}_{sub}"
                if isinstance(choice, list):
                    inner[sub] = trial.suggest_categorical(name, choice)
                elif choice["type"] == "int":
                    inner[sub] = trial.suggest_int(name, choice["low"], choice["high"], step=choice.get("step", 1))
                else:
                    inner[sub] = trial.suggest_float(name, choice["low"], choice["high"], log=choice.get("log", False))
            if inner:
                params[key] = inner
        elif isinstance(value, list):
            params[key] = trial.suggest_categorical(key, value)
    return params


def _condition_holds(condition: Any, params: dict[str, Any]) -> bool:
    """`only_if: "k"` holds once k was suggested; `only_if: {k: v}` when k was v (Quark reads the first item only)."""
    if isinstance(condition, str):
        return condition in params
    key, value = next(iter(condition.items()))
    return params.get(key) == value


def grid_space(space: dict[str, Any]) -> dict[str, Any]:
    """The space without its fine-tuning keys: what the grid stage of a two-stage search expands."""
    return {k: v for k, v in space.items() if k not in contract.FINETUNE_KEYS}


def pinned_stage2_space(space: dict[str, Any], winner: dict[str, Any]) -> dict[str, Any]:
    """The fine-tuning keys of `space`, plus every setting of the grid `winner` pinned as a one-choice list (F4).

    Quark's own stage 2 keeps only the winner's str and dict values; this keeps all of them.
    """
    stage2 = {k: copy.deepcopy(space[k]) for k in contract.FINETUNE_KEYS if k in space}
    for key, value in winner.items():
        if isinstance(value, dict):
            stage2[key] = {sub: [v] for sub, v in value.items()}
            stage2[key]["only_if"] = space[key]["only_if"]
        else:
            stage2[key] = [value]
    return stage2


def stage_configs(space: dict[str, Any], sampler: str, two_stage: bool, n_trials: int,
                  generate_all_configs: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The grid configurations to run first, in Quark's order (its generate_all_configs is passed in)."""
    if sampler == "Grid":
        return generate_all_configs(space)[:n_trials]
    if two_stage:
        return generate_all_configs(grid_space(space))
    return []


def config_key(config: dict[str, Any]) -> str:
    """A configuration's identity: equal configurations give equal keys."""
    return json.dumps(config, sort_keys=True)


def nested_from_flat(space: dict[str, Any], flat: dict[str, Any]) -> dict[str, Any]:
    """Optuna's flattened parameter names (group_param) back to Quark's nested config (F8)."""
    config: dict[str, Any] = {}
    for key, value in space.items():
        if isinstance(value, dict) and "only_if" in value:
            inner = {sub: flat[f"{key}_{sub}"] for sub in value if sub != "only_if" and f"{key}_{sub}" in flat}
            if inner:
                config[key] = inner
        elif key in flat:
            config[key] = flat[key]
    return config
