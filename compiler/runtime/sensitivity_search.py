"""The keep_float search dimension: a trial and keep_float.search in; the searched choice ({"top_k": k} or
{"coverage": f}) out, as an Optuna parameter like any other."""

from __future__ import annotations

from typing import Any

KEEP_FLOAT_PARAM = {"top_k": "keep_float_top_k", "coverage": "keep_float_coverage"}  # the Optuna parameter's name


def suggest_keep_float(trial: Any, search: dict[str, Any]) -> dict[str, Any]:
    """The search dimension's Optuna parameter: {"top_k": k} from the declared list, or {"coverage": f} in its range."""
    if "top_k" in search:
        return {"top_k": trial.suggest_categorical(KEEP_FLOAT_PARAM["top_k"], list(search["top_k"]))}
    low, high = search["coverage"]["low"], search["coverage"]["high"]
    return {"coverage": trial.suggest_float(KEEP_FLOAT_PARAM["coverage"], low, high)}
