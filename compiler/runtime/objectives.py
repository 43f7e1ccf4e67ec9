"""Objectives: settings and complete trials in; the tolerance bound, the recommended winner (with why), the Pareto front
and the tolerance stop out. Pure functions over Optuna's FrozenTrial (values, user_attrs, number); no storage.

The winner rule (README, "Objectives"): among the trials within tolerance, the fastest (latency objective; else the
smallest, size objective; else the most quantized, quantized_fraction objective); a latency whose measured spread
overlaps the fastest's (latency.py: each figure comes with the spread of its rounds) counts as a tie, and ties are
broken by accuracy, then size, then the lower trial number. Without those objectives, or with no tolerance declared,
or when no trial is within it, the most accurate wins (ties: size, latency, trial number), and the reason says which
case held. A configuration is ranked once (distinct): a trial answered from the study repeats the trial that really
quantized it, model file and all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import contract
from .latency import spread
from .space import config_key

ORIGINAL_FIRST = 0  # tie-break: a trial really quantized before one answered from the study
PRIMARY = ("latency", "size", "quantized_fraction")  # what the winner within tolerance is best at, first declared wins


@dataclass(frozen=True)
class Choice:
    winner: Any
    reason: str  # why it won, one sentence
    within: bool | None  # the winner is within tolerance (None: no tolerance declared)


def allowed_loss(settings: Any, float_score: float | None) -> float | None:
    """The tolerance in the accuracy objective's units (None: none declared, or relative without a float score)."""
    tolerance = settings.tolerance
    if tolerance is None:
        return None
    if tolerance["relative"]:
        return None if float_score is None else tolerance["value"] * abs(float_score)
    return float(tolerance["value"])


def bound(settings: Any, float_score: float | None) -> float | None:
    """The worst acceptable accuracy value: the loss itself for minimized values (a user evaluator's drop, L1, L2),
    1 - tolerance for the maximized similarities (cos, ssim: the float model scores 1 against itself)."""
    loss = allowed_loss(settings, float_score)
    if loss is None:
        return None
    return 1.0 - loss if settings.direction == "maximize" else loss


def is_within(settings: Any, accuracy: float, limit: float | None) -> bool | None:
    """An accuracy value within the bound (None: no bound)."""
    if limit is None:
        return None
    return accuracy >= limit if settings.direction == "maximize" else accuracy <= limit


def values(settings: Any, trial: Any) -> dict[str, float]:
    """A trial's values by objective name."""
    return dict(zip(settings.objectives, trial.values, strict=True))


def _oriented(settings: Any, name: str, value: float) -> float:
    """Smaller is better for every objective once oriented."""
    if name in contract.MAXIMIZED_OBJECTIVES:
        return -value
    return -value if name == "accuracy" and settings.direction == "maximize" else value


def _tail(settings: Any, trial: Any, order: tuple[str, ...]) -> tuple[float, ...]:
    v = values(settings, trial)
    reused = 1 if contract.ATTR_REUSED_FROM in trial.user_attrs else ORIGINAL_FIRST
    floated = len((trial.user_attrs.get(contract.ATTR_KEEP_FLOAT) or {}).get("nodes") or [])  # equal: fewer float
    return (*(_oriented(settings, n, v[n]) for n in order if n in v), floated, reused, trial.number)


def choose(settings: Any, trials: list[Any], limit: float | None) -> Choice | None:
    """The recommended winner of `trials` by the rule above (None when there are none)."""
    if not trials:
        return None
    within = [t for t in trials if is_within(settings, values(settings, t)["accuracy"], limit)]
    primary = next((n for n in PRIMARY if n in settings.objectives), None)
    most_accurate = ("accuracy", "size", "latency", "quantized_fraction")
    if limit is None or not within or primary is None:
        pool = within or trials
        winner = min(pool, key=lambda t: _tail(settings, t, most_accurate))
        if limit is None:
            return Choice(winner, "the most accurate (no tolerance declared)", None)
        if not within:
            return Choice(winner, "no trial is within tolerance: the most accurate", False)
        return Choice(winner, "within tolerance and the most accurate", True)
    fastest = min(within, key=lambda t: (_oriented(settings, primary, values(settings, t)[primary]),
                                         _tail(settings, t, ("accuracy", "size"))))
    best = values(settings, fastest)[primary]
    if primary == "latency":  # a tie: the two figures' measured spreads overlap (never a fixed percentage)
        reach = spread(fastest.user_attrs.get(contract.ATTR_LATENCY))
        tied = [t for t in within if values(settings, t)[primary] - best
                <= reach + spread(t.user_attrs.get(contract.ATTR_LATENCY))]
    else:
        tied = [t for t in within if values(settings, t)[primary] == best]
    winner = min(tied, key=lambda t: _tail(settings, t, ("accuracy", "size", "latency", "quantized_fraction")))
    what = {"latency": "the fastest", "size": "the smallest", "quantized_fraction": "the most quantized"}[primary]
    tied_configs = len({identity(t) for t in tied})
    if tied_configs > 1:
        noise = " within their measured latency spread" if primary == "latency" else ""
        what += (f" ({tied_configs} configurations tied{noise}, broken by accuracy, size, then the fewest nodes kept "
                 "float)")
    return Choice(winner, f"within tolerance and {what}", True)


def rule_text(settings: Any) -> str:
    """The winner rule in one sentence, for best_config.json's `rule`."""
    if "latency" in settings.objectives:
        first = ("the fastest (latencies whose measured spreads overlap the fastest's tie, broken by accuracy then "
                 "size)")
    elif "size" in settings.objectives:
        first = "the smallest (ties broken by accuracy)"
    elif "quantized_fraction" in settings.objectives:
        first = "the most quantized (ties broken by accuracy)"
    else:
        first = "the most accurate"
    return f"among trials within tolerance, {first}; if none is, the most accurate"


def ranking(settings: Any, trials: list[Any], limit: float | None, top: int | None = None) -> list[Any]:
    """Trials in the order the rule recommends them (the winner, the runner-up, ...), the first `top` of them."""
    left, out = list(trials), []
    while left and (top is None or len(out) < top):
        pick = choose(settings, left, limit).winner
        out.append(pick)
        left.remove(pick)
    return out


def identity(trial: Any) -> str:
    """What a trial measured: its configuration (a repeat answered from the study copies it), else its model file."""
    config = trial.user_attrs.get(contract.ATTR_CONFIG)
    if isinstance(config, dict):
        return "config " + config_key(config)
    model = trial.user_attrs.get(contract.ATTR_MODEL)
    return f"model {model}" if model is not None else f"trial {id(trial)}"


def distinct(ordered: list[Any]) -> list[tuple[Any, list[int]]]:
    """Trials in rank order in; each configuration once, at its best rank, out, with the numbers of the other trials
    that measured it. The one kept is a trial that really quantized it (one answered from the study shares its model
    and its values, so it is the same entry, not a runner-up)."""
    groups: dict[str, list[Any]] = {}
    for t in ordered:
        groups.setdefault(identity(t), []).append(t)
    out = []
    for members in groups.values():
        kept = next((t for t in members if contract.ATTR_REUSED_FROM not in t.user_attrs), members[0])
        out.append((kept, [t.number for t in members if t is not kept]))
    return out


def pareto_front(settings: Any, trials: list[Any]) -> list[tuple[Any, list[int]]]:
    """The non-dominated trials (by every objective, oriented), each configuration once (distinct), by trial number;
    each with the numbers of the trials that repeat its configuration."""
    kept = distinct(sorted(trials, key=lambda t: t.number))
    points = {id(t): [_oriented(settings, n, v) for n, v in values(settings, t).items()] for t, _ in kept}

    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x <= y for x, y in zip(a, b, strict=True)) and a != b

    return [(t, repeats) for t, repeats in kept if not any(dominates(points[id(o)], points[id(t)]) for o, _ in kept)]


def verdict(record: dict[str, Any] | None, float_record: dict[str, Any] | None) -> str | None:
    """A quantized model's latency record and the float model's in; "slower" (every round measured it slower),
    "not faster" (the rounds straddle the float model's latency) or None (faster, or a figure is missing) out."""
    if not isinstance(record, dict) or not isinstance(float_record, dict) or not float_record.get("median_ms"):
        return None
    ratio = record.get("ratio") or record["median_ms"] / float_record["median_ms"]
    low, high = record.get("ratio_range") or (ratio, ratio)
    return "slower" if low > 1.0 else "not faster" if high >= 1.0 else None


def versus_float(record: dict[str, Any] | None, float_record: dict[str, Any] | None) -> str | None:
    """The winner's latency record and the float model's in; a plain sentence when the quantized model is not
    measurably faster than the float model out (None when it is faster, or either figure is missing)."""
    found = verdict(record, float_record)
    if found is None:
        return None
    ratio = record.get("ratio") or record["median_ms"] / float_record["median_ms"]
    measured = (f"{ratio:.2f}x the float model's latency ({record['median_ms']:.3g} ms against "
                f"{float_record['median_ms']:.3g} ms per sample on {record.get('provider', '?')}, "
                f"{record.get('method', 'measured apart')})")
    if found == "slower":
        return (f"the quantized model is SLOWER than the float model: {measured}; quantization does not speed this "
                "model up on this device")
    return f"the quantized model is not measurably faster than the float model: {measured}"


def tolerance_stop(settings: Any, trials: list[Any], limit: float | None, float_score: float | None) -> str | None:
    """search.stop.at_tolerance: why the search may stop now, or None. Complete trials in completion order in.

    The rule: at least min_trials complete, at least one within tolerance, and none of the last `patience` trials
    improved any objective on the best of the trials before them by more than `margin` (accuracy: a fraction of
    the tolerance itself; latency and size: a fraction of the best value)."""
    stop = settings.stop or {}
    if not stop.get("at_tolerance") or limit is None:
        return None
    patience = stop.get("patience", contract.DEFAULT_PATIENCE)
    if len(trials) < max(stop.get("min_trials", contract.DEFAULT_MIN_TRIALS), patience + 1):
        return None
    within = [t for t in trials if is_within(settings, values(settings, t)["accuracy"], limit)]
    if not within:
        return None
    margin = stop.get("margin", contract.DEFAULT_MARGIN)
    earlier, recent = trials[:-patience], trials[-patience:]
    for name in settings.objectives:
        best = min(_oriented(settings, name, values(settings, t)[name]) for t in earlier)
        scale = allowed_loss(settings, float_score) if name == "accuracy" else abs(best)
        for t in recent:
            if _oriented(settings, name, values(settings, t)[name]) < best - margin * (scale or 0.0):
                return None
    return (f"{len(trials)} trials complete, {len(within)} within tolerance, and the last {patience} improved no "
            f"objective by more than {margin:g}")


def trial_record(settings: Any, trial: Any, limit: float | None, repeats: list[int] | None = None) -> dict[str, Any]:
    """One trial for best_config.json and pareto.json: its number, stage, values, tolerance, model and config, and
    the trials that repeated its configuration (answered from the study)."""
    record: dict[str, Any] = {"trial_number": trial.number, "stage": trial.user_attrs.get(contract.ATTR_STAGE),
                              "values": values(settings, trial), "repeated_by": list(repeats or [])}
    if limit is not None:
        record["within_tolerance"] = bool(is_within(settings, record["values"]["accuracy"], limit))
    if contract.ATTR_LATENCY in trial.user_attrs:
        record["latency"] = trial.user_attrs[contract.ATTR_LATENCY]
    record["model"] = trial.user_attrs.get(contract.ATTR_MODEL)
    record["config"] = trial.user_attrs.get(contract.ATTR_CONFIG)
    return record
