"""Quark's AutoSearch presets as data: a preset name in, a fresh deep copy of its config out.

compiler/data/presets.json equals amd-quark 0.13's get_auto_search_config(name); a test keeps it so.
"""

from __future__ import annotations

import copy
from typing import Any

from compiler.resources import load_data

PRESET_NAMES = ("ADVANCED_SEARCH", "XINT8_SEARCH", "A8W8_SEARCH", "A16W8_SEARCH")


def preset_config(name: str) -> dict[str, Any]:
    """A preset's whole config (all 18 keys) as Quark defines it; a copy the caller may change."""
    return copy.deepcopy(load_data("presets.json")[name])
