"""The report's objectives: best_config.json and the complete trials in; the winner rule's ranking, the stop record,
and the float-versus-winner figures (speed-up, slower than float, loss, tolerance met) and the Pareto front out,
JSON-ready.

The ranking is the runtime's own rule (compiler/runtime/objectives.py), read with the settings best_config.json
records, so the report ranks exactly as the search did.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from compiler.runtime import objectives
from compiler.runtime.contract import PARETO_FILE, STOPPED_ATTR


def _rule_settings(saved: dict[str, Any], direction: str) -> Any:
    tolerance = saved.get("tolerance")
    return SimpleNamespace(objectives=saved["objectives"], direction=direction, stop=None,
                           tolerance=None if tolerance is None else {"value": tolerance["value"],
                                                                     "relative": tolerance["relative"]})


def recommend(saved: dict[str, Any] | None, direction: str, trials: list[Any]) -> dict[str, Any] | None:
    """The winner rule's ranking of the complete trials, when best_config.json says the search used it; else None."""
    if not isinstance(saved, dict) or "why" not in saved or not trials:
        return None
    settings = _rule_settings(saved, direction)
    limit = (saved.get("tolerance") or {}).get("bound")
    usable = [t for t in trials if len(t.values) == len(settings.objectives)]
    return {"settings": settings, "limit": limit, "ranking": objectives.ranking(settings, usable, limit)}


def stopped_record(saved: dict[str, Any] | None, studies: list[Any]) -> dict[str, Any] | None:
    """The stop record (search.stop): the study's, else best_config.json's; None when the search was not stopped."""
    for study in studies:
        record = study.user_attrs.get(STOPPED_ATTR) if study is not None else None
        if record:
            return record
    return saved.get("stopped") if isinstance(saved, dict) else None


def objectives_view(saved: dict[str, Any] | None, recommended: dict[str, Any] | None,
                    out_dir: Path) -> dict[str, Any] | None:
    """Float model against the winner (accuracy, latency, size; speed-up, loss), the tolerance, why it won, the
    runner-up and the Pareto front (pareto.json); None without the winner rule. The speed-up is the inverse of the
    winner's measured ratio to the float model; versus_float says plainly when the winner is not faster."""
    if recommended is None:
        return None
    values, float_ = saved.get("values", {}), saved.get("float") or {}
    float_latency = (float_.get("latency") or {}).get("median_ms")
    latency, record = values.get("latency"), saved.get("latency") or {}
    ratio = record.get("ratio") if isinstance(record.get("ratio"), (int, float)) and record["ratio"] > 0 else None
    if ratio is None and float_latency and latency:
        ratio = latency / float_latency  # a record of an older run: two figures measured apart
    front = None
    pareto = out_dir / PARETO_FILE
    if pareto.is_file():
        try:
            front = json.loads(pareto.read_text(encoding="utf-8")).get("front")
        except (OSError, ValueError):
            front = None
    return {
        "objectives": saved["objectives"], "why": saved.get("why"), "rule": saved.get("rule"),
        "tolerance": saved.get("tolerance"), "winner": values, "winner_latency": saved.get("latency"),
        "float": {"score": float_.get("score"), "latency_ms": float_latency, "latency": float_.get("latency"),
                  "size_bytes": float_.get("size_bytes")},
        "loss": values.get("accuracy"),
        "speedup": 1.0 / ratio if ratio else None,  # the rounds' ratio, measured interleaved with the float model
        "verdict": objectives.verdict(saved.get("latency"), float_.get("latency")),  # "slower", "not faster", None
        "size_ratio": (values["size"] / float_["size_bytes"]) if values.get("size") and float_.get("size_bytes")
        else None,
        "runner_up": saved.get("runner_up"), "pareto": front,
    }
