"""Did-you-mean: an unknown word and the valid ones in, a hint sentence (or None) out."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The valid choice nearest to word (case-insensitive exact match first), or None."""
    options = [c for c in choices if isinstance(c, str)]
    for option in options:
        if option.lower() == str(word).lower():
            return option
    found = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    options = list(choices)
    best = closest(word, options)
    if best is not None:
        return f"did you mean {best!r}?"
    if options and len(options) <= 12:
        return "expected one of: " + ", ".join(repr(o) for o in options)
    return None
