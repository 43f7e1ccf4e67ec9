"""Search-space pass: Spec in; QAS31x/32x diagnostics out for Quark's real grammar (QUARK-FACTS §grammar).

Quark silently renames, skips or ignores whatever does not fit its grammar; every such case is an
error here. Paths point into the user's `space` or `override` where the key was written there,
else at `search.preset`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compiler.check.resolved import merged_space, two_stage
from compiler.check.spacemath import FINETUNE_KEYS, is_range
from compiler.diagnostics import Diagnostic, YamlPath, diag
from compiler.front.model import Spec
from compiler.front.suggest import closest, did_you_mean
from compiler.resources import load_data

GROUPS = ("activation_params", "weight_params", "cle_params", "adaround_params", "adaquant_params")
CHOICE_KEYS = ("activation", "weight", "algorithms", "cle_algo")
RESERVED = ("global_config", "algo_config", "extra_options")  # qas/Quark build these from other keys
# AdaRound/AdaQuant accept these but never apply them (QUARK-FACTS F15).
IGNORED_BY_QUARK = ("output_index", "ref_model_path", "dynamic_batch", "parallel", "reg_param",
                    "beta_range", "warm_start")
SCALARS = (type(None), bool, int, float, str)


def grammar() -> dict[str, Any]:
    return load_data("quark_grammar.json")


def allowed_top_keys() -> list[str]:
    g = grammar()
    return sorted(set(g["qconfig_params"]) - set(RESERVED) | set(GROUPS) | set(CHOICE_KEYS))


def group_params(group: str) -> list[str]:
    g = grammar()
    if group in ("activation_params", "weight_params"):
        return list(g["spec_params"])
    if group == "cle_params":
        return list(g["cle_params"])
    return [*g[group], "NumIterLR"]


def choice_enums() -> dict[str, list[Any]]:
    g = grammar()
    return {
        "activation": g["spec_classes"], "weight": g["spec_classes"],
        "algorithms": [*g["algorithms"], None], "cle_algo": ["cle", None],
        "calibration_method": g["calibration_methods"], "scale_type": g["scale_types"],
        "quant_granularity": g["granularities"], "data_type": g["data_types"],
    }


class Locator:
    """Maps a key of the merged space back to where the user wrote it."""

    def __init__(self, spec: Spec):
        s = spec.search
        if s.space is not None:
            self.base: YamlPath = (*s.path, "space")
            self.written = s.space
        else:
            self.base = (*s.path, "override")
            self.written = s.override or {}
        self.preset_path: YamlPath = (*s.path, "preset")

    def __call__(self, *keys: str | int) -> YamlPath:
        node: Any = self.written
        for k in keys:
            if ((isinstance(node, dict) and k in node)
                    or (isinstance(node, list) and isinstance(k, int) and k < len(node))):
                node = node[k]
            else:
                # not written by the user at this depth: point at the deepest part they wrote
                depth = keys.index(k)
                return self.base + tuple(keys[:depth]) if depth else self.preset_path
        return self.base + tuple(keys)


def check(spec: Spec) -> Iterator[Diagnostic]:
    space = merged_space(spec)
    at = Locator(spec)
    grid_all = spec.search.sampler == "Grid"
    staged = two_stage(spec)
    seen: list[str] = []
    allowed = allowed_top_keys()
    for key, value in space.items():
        if key not in allowed:
            hint = _group_of(key, GROUPS) if closest(key, allowed) is None else None
            hint = hint or did_you_mean(key, allowed)
            if key in RESERVED:
                hint = "qas builds this from activation/weight/algorithms; remove it"
            yield diag("QAS310", f"{key!r} is not a search-space key Quark knows (Quark would rename or drop it)",
                       at(key), hint=hint, at_key=True)
        elif isinstance(value, list):
            yield from _check_choices(key, value, at, top=True)
            if key in GROUPS:
                yield diag("QAS314", f"{key!r} must be a group with only_if, not a list", at(key),
                           hint=f"write {key}: {{..., only_if: ...}}")
        elif isinstance(value, dict) and "only_if" in value:
            if key not in GROUPS:
                yield diag("QAS314", f"only {', '.join(GROUPS)} can be groups; {key!r} cannot", at(key),
                           hint=f"write {key} as a list of choices", at_key=True)
            else:
                yield from _check_only_if(key, value["only_if"], space, seen, at)
                yield from _check_group(key, value, at, must_be_lists=grid_all or (staged and key not in FINETUNE_KEYS))
        elif is_range(value):
            yield diag("QAS313", f"{key!r} is a range at the top level; Quark only reads ranges inside groups "
                                 "and would silently ignore it", at(key),
                       hint="move it into a group such as adaquant_params, or list the choices")
        elif isinstance(value, dict):
            yield diag("QAS314", f"{key!r} is a mapping without only_if; Quark would silently ignore it", at(key),
                       hint="add only_if to make it a conditional group, or write a list of choices")
        else:
            yield diag("QAS325", f"{key!r} must be a list of choices, not a single {type(value).__name__}; "
                                 "Quark would silently ignore it", at(key),
                       hint=f"write {key}: [{value!r}]" if isinstance(value, SCALARS) else None)
        seen.append(key)


def _group_of(key: str, groups: Any) -> str | None:
    """'num_iterations' is a parameter of adaround_params or adaquant_params: a hint naming the groups a key belongs
    in."""
    owners = [g for g in groups if key in group_params(g)]
    if not owners:
        return None
    where = "that group" if len(owners) == 1 else "one of them"
    return f"{key!r} is a parameter of {' or '.join(owners)}: write it inside {where}"


def _check_choices(key: str, values: list[Any], at: Locator, top: bool,
                   group: str | None = None) -> Iterator[Diagnostic]:
    keys = (group, key) if group else (key,)
    if not values:
        yield diag("QAS321", f"{'.'.join(keys)} has no choices", at(*keys), hint="list at least one value")
        return
    enums = choice_enums()
    for i, v in enumerate(values):
        if isinstance(v, dict):
            code = "QAS313" if is_range(v) else "QAS325"
            yield diag(code, f"a choice of {'.'.join(keys)} is a mapping; Quark's choices are plain values",
                       at(*keys, i), hint="ranges go directly under a group key, not inside a list")
        elif key == "exclude" and top and not (v is None or isinstance(v, str)):
            yield diag("QAS322", "Quark wraps exclude in a 1-tuple, so a list of node names is silently ignored",
                       at(*keys, i), hint="give one node name per choice")
        elif key in enums and (not top or key in CHOICE_KEYS) and v not in enums[key]:  # a list is no enum value
            yield diag("QAS316", f"{v!r} is not a value Quark knows for {key} (its strings are case-sensitive)",
                       at(*keys, i), hint=did_you_mean(str(v), [e for e in enums[key] if e is not None]))
        elif (isinstance(v, list) and key not in ("NumIterLR", "PercentileCandidates", "exclude")
              and not all(isinstance(x, SCALARS) for x in v)):
            yield diag("QAS325", f"a choice of {'.'.join(keys)} holds nested mappings", at(*keys, i))
    if key == "NumIterLR":
        for i, v in enumerate(values):
            ok = (isinstance(v, list) and len(v) == 2 and isinstance(v[0], int) and not isinstance(v[0], bool)
                  and isinstance(v[1], (int, float)) and not isinstance(v[1], bool))
            if not ok:
                yield diag("QAS317", f"NumIterLR choice {v!r} is not an [iterations, learning_rate] pair",
                           at(*keys, i), hint="for example NumIterLR: [[1000, 0.1], [3000, 0.01]]")


def _check_only_if(key: str, cond: Any, space: dict[str, Any], seen: list[str], at: Locator) -> Iterator[Diagnostic]:
    where = at(key, "only_if")
    if isinstance(cond, dict):
        if len(cond) != 1:
            yield diag("QAS323", f"only_if of {key!r} must have exactly one item (Quark reads only the first)",
                       where, hint="for example only_if: {algorithms: adaquant}")
            return
        target, wanted = next(iter(cond.items()))
    elif isinstance(cond, str):
        target, wanted = cond, None
    else:
        yield diag("QAS323", f"only_if of {key!r} must name a key or be a one-item mapping", where,
                   hint="for example only_if: activation")
        return
    if target not in space:
        yield diag("QAS311", f"only_if of {key!r} names {target!r}, which is not in the space; "
                             "Quark would silently skip the group", where,
                   hint=did_you_mean(str(target), [k for k in space if k != key]))
    elif target not in seen:
        yield diag("QAS312", f"group {key!r} comes before its condition {target!r}; Quark iterates in order "
                             "and would silently skip it", at(key),
                   hint=f"move {key!r} below {target!r}", at_key=True)
    elif wanted is not None and isinstance(space[target], list) and wanted not in space[target]:
        yield diag("QAS323", f"only_if of {key!r} waits for {target}={wanted!r}, which is never a choice",
                   where, hint=did_you_mean(str(wanted), [str(c) for c in space[target]]))


def _check_group(group: str, body: dict[str, Any], at: Locator, must_be_lists: bool) -> Iterator[Diagnostic]:
    known = group_params(group)
    for param, value in body.items():
        if param == "only_if":
            continue
        if param in IGNORED_BY_QUARK and group in ("adaround_params", "adaquant_params"):
            yield diag("QAS318", f"{group}.{param} is accepted by Quark but never applied", at(group, param),
                       hint="remove it: it would not change the result", at_key=True)
        elif param not in known:
            elsewhere = _group_of(param, [g for g in GROUPS if g != group]) if closest(param, known) is None else None
            yield diag("QAS319", f"{param!r} is not a parameter of {group}", at(group, param),
                       hint=elsewhere or did_you_mean(param, known), at_key=True)
        elif isinstance(value, list):
            yield from _check_choices(param, value, at, top=False, group=group)
        elif is_range(value):
            yield from _check_range(group, param, value, at)
            if must_be_lists:
                yield diag("QAS315", f"{group}.{param} is a range, but this stage is a grid: every value must be "
                                     "a list (Quark raises ValueError after the float baseline ran)",
                           at(group, param), hint="list the values to try, or set sampler to TPE")
        else:
            yield diag("QAS325", f"{group}.{param} must be a list of choices or a range; Quark would silently "
                                 "ignore it", at(group, param),
                       hint=f"write [{value!r}]" if isinstance(value, SCALARS) else None)


def _whole_hint(value: Any) -> str | None:
    """`write 3` for 3.0 (Optuna's int ranges refuse floats at run time), else None."""
    if isinstance(value, float) and value.is_integer():
        return f"write {int(value)}"
    return None


def _check_range(group: str, param: str, value: dict[str, Any], at: Locator) -> Iterator[Diagnostic]:
    where = at(group, param)
    kind = value.get("type")
    if kind not in ("int", "float"):
        yield diag("QAS320", f"{group}.{param}: range type must be 'int' or 'float', not {kind!r}", where,
                   hint=did_you_mean(str(kind), ["int", "float"]))
        return
    allowed = {"type", "low", "high"} | ({"step"} if kind == "int" else {"log"})
    for extra in sorted(set(value) - allowed):
        ignored = {"log": "int ranges ignore log", "step": "float ranges ignore step"}.get(extra, "unknown key")
        yield diag("QAS320", f"{group}.{param}: {extra!r} has no effect ({ignored} in Quark)", (*where, extra),
                   hint=f"allowed here: {', '.join(sorted(allowed))}", at_key=True)
    number = int if kind == "int" else (int, float)
    low, high = value.get("low"), value.get("high")
    for name, bound in (("low", low), ("high", high)):
        if not isinstance(bound, number) or isinstance(bound, bool):
            words = "an integer" if kind == "int" else "a number"
            yield diag("QAS320", f"{group}.{param}: {name} must be {words}"
                                 + (f", not {bound!r}" if isinstance(bound, float) else ""),
                       where + ((name,) if name in value else ()), hint=_whole_hint(bound) or "write low and high")
            return
    if low > high:
        yield diag("QAS320", f"{group}.{param}: low {low} is above high {high}", where)
    step = value.get("step", 1)
    if kind == "int" and (not isinstance(step, int) or isinstance(step, bool) or step < 1):
        yield diag("QAS320", f"{group}.{param}: step must be a positive integer"
                             + (f", not {step!r}" if isinstance(step, float) else ""),
                   (*where, "step"), hint=_whole_hint(step) if isinstance(step, float) and step >= 1 else None)
    if kind == "float" and value.get("log") and low <= 0:
        yield diag("QAS320", f"{group}.{param}: a log range needs low > 0", where)
    if "log" in value and not isinstance(value["log"], bool):
        yield diag("QAS320", f"{group}.{param}: log must be true or false", where)
