"""The script's entry point: settings in; the checks, the engine's search, and the process exit code out."""

from __future__ import annotations

import importlib

from . import contract
from .checks import check_device, check_packages
from .settings import Settings


def main(settings: Settings) -> int:
    """Check packages and the device (exit EXIT_USAGE before any work), then run the settings' engine."""
    check_packages(settings.requirements)
    check_device(settings.device)
    engine = importlib.import_module(f".{contract.ENGINES[settings.engine].entry}", __package__)
    return engine.main(settings)
