"""The quantized_fraction objective with the real amd-quark on a zoo model: each trial's value is the share of the
float nodes it quantized among those quantized or kept float, so a trial keeping more of the sensitivity ranking in
float scores lower; the Pareto front, the winner rule (the most quantized within tolerance), the report and the plots
carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import needs_quark, qas
from .zoo import build

pytestmark = [pytest.mark.e2e, needs_quark]


def test_quantized_fraction_falls_as_more_of_the_ranking_stays_float(tmp_path: Path) -> None:
    zm = build("resnet_bn", tmp_path)
    zm.write_spec(tmp_path, preset="XINT8_SEARCH", n_trials=6, extra_yaml=(
        "search: {sampler: NSGAII, objectives: [accuracy, quantized_fraction]}\nevaluation: {tolerance: 100}\n"
        "output: {plots: true}\n"
        "keep_float: {sensitivity: {method: L2, samples: 4}, search: {top_k: [0, 1, 3]}}\n"))
    done = qas("run", "spec.yaml", "--yes", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "autosearch_output"
    report = json.loads(qas("report", "autosearch_output", "--format", "json", cwd=tmp_path).stdout)
    complete = [t for t in report["all_trials"] if t["state"] == "COMPLETE"]
    best = json.loads((out / "best_config.json").read_text())
    assert best["objectives"] == ["accuracy", "quantized_fraction"]

    import optuna

    study = optuna.load_study(study_name=report["study"]["name"],
                              storage=optuna.storages.JournalStorage(
                                  optuna.storages.journal.JournalFileBackend(str(out / report["study"]["db"]))))
    by_k: dict[int, set[float]] = {}
    for trial in study.trials:
        if trial.state.name != "COMPLETE":
            continue
        record = trial.user_attrs["quantized_nodes"]
        k = trial.user_attrs["config"]["keep_float"]["top_k"]
        kept = set(trial.user_attrs["keep_float"]["nodes"]) & set(zm.weight_nodes)
        assert record["fraction"] == trial.values[1] == record["quantized"] / record["weight_nodes"]
        assert record["weight_nodes"] == len(zm.weight_nodes)
        assert record["quantized"] == len(zm.weight_nodes) - len(kept)  # each kept weight node is float, the rest not
        by_k.setdefault(k, set()).add(trial.values[1])
    assert by_k.get(0, {1.0}) == {1.0}, by_k  # nothing kept float: every weight node quantized
    fractions = [max(by_k[k]) for k in sorted(by_k)]
    assert fractions == sorted(fractions, reverse=True) and len(by_k) >= 2, by_k  # more kept float, lower share
    assert best["tolerance"]["met"] is True
    most = max(t.values[1] for t in study.trials if t.state.name == "COMPLETE")
    assert best["values"]["quantized_fraction"] == most  # within tolerance: the most quantized wins
    assert (out / "report" / "optimization_history_quantized_fraction.html").is_file()
    assert (out / "report" / "pareto_front.html").is_file()
    text = qas("report", "autosearch_output", cwd=tmp_path).stdout
    assert "of the weight nodes" in text and len(complete) == 6
