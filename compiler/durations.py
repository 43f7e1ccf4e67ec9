"""Durations as a spec writes them: a number of seconds, or a string "90s" / "10m" / "2h" in; seconds out.

One parser for every duration field (search.trial_timeout, search.stop.timeout, storage.heartbeat and
grace_period, output.launch.slurm.time), so the schema's maximum holds for the string form as it does for the
number ("99999999999h" is as much out of range as 359999999996400).
"""

from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600}
DURATION = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([smh])$")  # what the schema's patterns allow, at most


def seconds(duration: float | str | None) -> float | None:
    """A duration (number of seconds, or a string of DURATION) in; seconds out (None for None, and for a string that
    is no duration). A string of many digits is inf, never an error."""
    if duration is None or isinstance(duration, (int, float)):
        return None if duration is None else float(duration)
    found = DURATION.match(duration)
    return None if found is None else float(found.group(1)) * UNITS[found.group(3)]


def words(total: float) -> str:
    """Seconds in; the largest whole unit that states them exactly ("7 days", "24 hours", "90 seconds") out."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if total >= size and total % size == 0:
            count = int(total // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{total:g} seconds"
