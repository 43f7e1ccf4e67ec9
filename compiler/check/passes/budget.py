"""Budget pass: Spec in; QAS40x diagnostics out. The counts themselves come from `budget.count_budget`.

Quark clamps n_trials to its "discrete space size", which ignores continuous ranges (QUARK-FACTS
F3); the script restores the requested count, so the clamp is only noted here.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from compiler.check.budget_facts import Budget, count_budget, gb
from compiler.check.resolved import accuracy_control, engine, merged_space, quark_runs_search, spec_path, two_stage
from compiler.diagnostics import Diagnostic, diag
from compiler.front.model import Spec

MAX_TRIALS_WITHOUT_OPT_IN = 200
LARGE_DISK_BYTES = 100 * 10**9


def check(spec: Spec) -> Iterator[Diagnostic]:
    b = count_budget(spec)
    trials_at = (*spec.search.path, "n_trials")
    n = b.requested_trials
    if n > MAX_TRIALS_WITHOUT_OPT_IN and not spec.search.allow_over_200_trials:
        yield diag("QAS401", f"n_trials {n} is above {MAX_TRIALS_WITHOUT_OPT_IN}: about {b.models_produced} "
                             f"quantized models and {gb(b.disk_estimate_bytes)} of disk", trials_at,
                   hint="lower n_trials, or add `allow_over_200_trials: true` under search")
    if spec.search.sampler == "Grid":
        total = int(b.distinct_configs)
        if n < total:
            yield diag("QAS404", f"Grid has {total} configurations; n_trials {n} runs only the first {n}",
                       trials_at, hint=f"set n_trials: {total} to try them all")
        elif n > total:
            yield diag("QAS404", f"Grid has only {total} configurations; {total} will run, not {n}",
                       trials_at, hint=f"set n_trials: {total}")
    elif accuracy_control(spec):
        pass  # n_trials caps its steps, and it stops once the answer is proven: no configuration repeats
    elif two_stage(spec) and "algorithms" not in merged_space(spec):
        yield diag("QAS407", "two-stage search without `algorithms` runs only the grid stage; n_trials is unused",
                   trials_at, hint="add algorithms to the space, or set two_stage: false")
    elif b.distinct_configs < n:
        yield diag("QAS403", f"the sampler can draw only {int(b.distinct_configs)} distinct configurations, "
                             f"but n_trials is {n}: the rest would repeat", trials_at,
                   hint=f"set n_trials: {int(b.distinct_configs)}, or add a continuous range to a group")
    clamped = spec.search.sampler != "Grid" and b.quark_would_run < n <= b.distinct_configs
    if clamped and quark_runs_search(engine(spec)):
        yield diag("QAS402", f"Quark would clamp n_trials {n} to {b.quark_would_run} (its space size ignores "
                             f"continuous ranges); the script restores {n}", trials_at)
    yield from _check_disk(spec, b)


def _check_disk(spec: Spec, b: Budget) -> Iterator[Diagnostic]:
    out = spec_path(spec, spec.output.dir)
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    at = (*spec.output.path, "dir")
    if b.disk_estimate_bytes > free:
        yield diag("QAS405", f"the search writes about {gb(b.disk_estimate_bytes)} ({b.models_produced} models of "
                             f"about {gb(b.quantized_bytes)}, {gb(b.dump_bytes)} of output dumps), but only {gb(free)} "
                             f"is free at {probe}", at,
                   hint="free space, choose another output.dir, or lower n_trials")
    elif b.disk_estimate_bytes > LARGE_DISK_BYTES:
        yield diag("QAS406", f"the search writes about {gb(b.disk_estimate_bytes)} ({b.models_produced} models)",
                   at, hint="lower n_trials if that is more than intended")

