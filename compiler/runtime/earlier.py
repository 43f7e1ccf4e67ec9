"""Model files of earlier studies in the output folder: the storage and the search's study names in; the files
those studies' trials wrote moved to earlier_studies/<study>/ (said in one line), before this study writes its own.

A changed search space starts a new study in the same journal (its name carries the space's hash), and its trials
are numbered from 0 again: without this, `quantized_model_sampler_0.onnx` of the new study would overwrite the
earlier study's file of the same name, and a report of the earlier spec would show another study's model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import contract
from .console import say

EARLIER_DIR = "earlier_studies"


def set_aside_earlier_models(storage: Any, here: Path, current: set[str], existing: set[str]) -> None:
    """Move every model file a study in `existing` but not `current` recorded (and no current trial did) into
    here/earlier_studies/<that study>/; never overwrite a file already there (a number is added instead)."""
    ours = _models(storage, current & existing)
    for name in sorted(existing - current):
        files = [f for f in _models(storage, {name}) if f not in ours and (here / f).is_file()]
        if not files:
            continue
        target = here / EARLIER_DIR / name
        target.mkdir(parents=True, exist_ok=True)
        for file in files:
            (here / file).rename(_free(target / file))
        say(f"qas: study {name!r} of an earlier version of this spec is in the same study file; its {len(files)} "
            f"model file(s) were moved to {EARLIER_DIR}/{name}/ so this search's trials do not overwrite them")


def earlier_versions(study_name: str, names: set[str], storage_kind: str) -> set[str]:
    """The study names in the storage that may be earlier versions of this spec's search: every study of the study
    file in the output folder (it holds this spec's studies only); in a shared database, those named like this one
    but for the hash after the last '-' (other specs' studies live there too)."""
    if storage_kind != "url":
        return set(names)
    stem = study_name.rsplit("-", 1)[0] + "-"
    return {n for n in names if n.startswith(stem)}


def _models(storage: Any, names: set[str]) -> set[str]:
    """The model file names the trials of these studies recorded."""
    found: set[str] = set()
    for name in names:
        study_id = storage.get_study_id_from_name(name)
        for trial in storage.get_all_trials(study_id, deepcopy=False):
            model = trial.user_attrs.get(contract.ATTR_MODEL)
            if isinstance(model, str) and model == Path(model).name:  # a bare file name in the output folder
                found.add(model)
    return found


def _free(path: Path) -> Path:
    """`path`, or the first `stem.N.suffix` beside it that does not exist."""
    n = 1
    candidate = path
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.{n}{path.suffix}")
        n += 1
    return candidate
