"""Arithmetic over a search space in Quark's grammar: a space (dict) in, counts and derived spaces out.

These mirror amd-quark 0.13's own code (config_generator.generate_all_configs, utils.validate_search_space,
AutoSearchPro._two_stage_search); tests compare them with the installed Quark.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from compiler.runtime.contract import FINETUNE_KEYS

ALGORITHM_GROUPS = {"adaround": "adaround_params", "adaquant": "adaquant_params"}
DEVICE_FIELDS = ("optim_device", "infer_device")


def is_range(value: Any) -> bool:
    return isinstance(value, dict) and "type" in value and "only_if" not in value


def is_group(value: Any) -> bool:
    return isinstance(value, dict) and "only_if" in value


def condition_met(config: dict[str, Any], condition: Any) -> bool:
    """Quark's grid rule: a string needs a non-None value; a mapping needs every item equal."""
    if isinstance(condition, str):
        return config.get(condition) is not None
    if isinstance(condition, dict):
        return all(config.get(k) == v for k, v in condition.items())
    return False


def count_configs(space: dict[str, Any]) -> int:
    """Number of configurations Quark's generate_all_configs yields for a list-only space."""
    base = [k for k, v in space.items() if isinstance(v, list)]
    groups = [(k, v) for k, v in space.items() if isinstance(v, dict)]
    total = 0
    for combo in _product_dicts({k: space[k] for k in base}):
        configs = [combo]
        for name, group in groups:
            nxt = []
            for cfg in configs:
                if group.get("only_if") is not None and not condition_met(cfg, group["only_if"]):
                    nxt.append(cfg)
                    continue
                inner = {k: v for k, v in group.items() if k != "only_if"}
                n = math.prod(len(v) for v in inner.values()) if inner else 1
                nxt.extend([{**cfg, name: i} for i in range(max(n, 1))])
            configs = nxt
        total += len(configs)
    return total


def _product_dicts(lists: dict[str, list[Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{}]
    for key, values in lists.items():
        out = [{**o, key: v} for o in out for v in values]
    return out


def quark_discrete_size(space: dict[str, Any]) -> int:
    """Quark's 'discrete space size': the product of every list length, groups included, conditions ignored."""
    sizes: list[int] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            sizes.append(len(value))

    for value in space.values():
        walk(value)
    return math.prod(sizes)


def has_continuous(space: dict[str, Any]) -> bool:
    """True when any group holds an int/float range (an unbounded number of configurations)."""
    return any(is_group(v) and any(is_range(x) for x in v.values()) for v in space.values())


def stage1_space(space: dict[str, Any]) -> dict[str, Any]:
    """The grid stage of a two-stage search: everything but the fine-tuning keys."""
    return {k: v for k, v in space.items() if k not in FINETUNE_KEYS}


def stage2_template(space: dict[str, Any]) -> dict[str, Any]:
    """The fine-tuning keys that stage 2 searches (the stage-1 winner is added at run time)."""
    return {k: space[k] for k in FINETUNE_KEYS if k in space}


def optuna_distinct(space: dict[str, Any]) -> float:
    """Distinct configurations a sampler can draw: math.inf with a continuous range, else the grid count."""
    if has_continuous(space):
        return math.inf
    return count_configs(space)


def with_device(space: dict[str, Any], torch_device: str) -> dict[str, Any]:
    """A copy of space where every AdaRound/AdaQuant group's device fields are [torch_device].

    A group that the algorithms choice needs but the space lacks is added, so that no algorithm
    falls back to its built-in default device.
    """
    out = copy.deepcopy(space)
    algorithms = out.get("algorithms")
    chosen = [a for a in algorithms if a in ALGORITHM_GROUPS] if isinstance(algorithms, list) else []
    for algo in chosen:
        group_name = ALGORITHM_GROUPS[algo]
        if group_name not in out:
            out[group_name] = {"only_if": {"algorithms": algo}}
    for group_name in ALGORITHM_GROUPS.values():
        group = out.get(group_name)
        if not isinstance(group, dict):
            continue
        only_if = group.pop("only_if", None)
        for f in DEVICE_FIELDS:
            group[f] = [torch_device]
        if only_if is not None:
            group["only_if"] = only_if
    return out
