"""Trial models in a shared folder (storage.artifacts), through Optuna's artifact store: a trial and its model in;
the model uploaded (its artifact id in the trial's `artifact` attribute), or fetched back for the winner, out.

Workers on several machines each write models in their own output folder; with an artifact folder that
every machine mounts, the winner can be copied to best_model.onnx on any of them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from .contract import ATTR_ARTIFACT


def _store(settings: Any) -> Any:
    from optuna.artifacts import FileSystemArtifactStore

    folder = Path(settings.storage["artifacts"])
    folder.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(folder))


def enabled(settings: Any) -> bool:
    return bool(settings.storage.get("artifacts"))


def store_artifact(settings: Any, trial: Any, model: Path) -> None:
    """Upload a scored trial's model to the artifact folder (when there is one), naming it on the trial."""
    if not enabled(settings):
        return
    from optuna.artifacts import upload_artifact

    artifact_id = upload_artifact(artifact_store=_store(settings), file_path=str(model), study_or_trial=trial)
    trial.set_user_attr(ATTR_ARTIFACT, artifact_id)


def fetch_artifact(settings: Any, trial: Any, destination: Path) -> bool:
    """Copy a trial's model from the artifact folder to `destination`; False when it has none there."""
    artifact_id = trial.user_attrs.get(ATTR_ARTIFACT)
    if not enabled(settings) or artifact_id is None:
        return False
    from optuna.artifacts import download_artifact

    destination.unlink(missing_ok=True)  # download_artifact refuses to overwrite
    download_artifact(artifact_store=_store(settings), artifact_id=artifact_id, file_path=str(destination))
    return True


def remove_artifact(settings: Any, trial: Any) -> None:
    """Delete a pruned trial's model from the artifact folder too."""
    artifact_id = trial.user_attrs.get(ATTR_ARTIFACT)
    if enabled(settings) and artifact_id is not None:
        with contextlib.suppress(FileNotFoundError):  # another worker pruned it already
            _store(settings).remove(artifact_id)
