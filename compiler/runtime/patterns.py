"""Block patterns (keep_float.blocks): a pattern string in; a matcher whose search(name) runs in linear time out, or
PatternError with RE2's own reason.

The compile pass and the runtime both match through this module, so a pattern means the same in both. RE2
(google-re2, imported when first needed) never backtracks: `(a+)+$` or `(.*)` x 150 cost time linear in the node
name, where Python's re takes hours. RE2 refuses what it cannot run in linear time (backreferences, lookaround)
and repetition counts above 1000; a count too large to parse it would take as literal text, so that is refused
here first. Captures are off: only whether a pattern matches is used.
"""

from __future__ import annotations

import re
from typing import Any

RE2_DISTRIBUTION = "google-re2"  # the distribution that provides the `re2` module
MAX_REPEAT = 1000  # RE2's largest {n,m} count
_COUNT = re.compile(r"\{(?P<low>[0-9]*)(?:,(?P<high>[0-9]*))?\}")  # no nested quantifier: linear


class PatternError(ValueError):
    """A pattern RE2 cannot compile (str: the reason)."""


class PatternEngineMissing(ImportError):
    """google-re2 is not installed in this interpreter."""


def block_pattern(pattern: str) -> Any:
    """A block pattern in; a compiled RE2 pattern (its .search(name) is a match or None) out."""
    try:
        import re2
    except ImportError as error:
        raise PatternEngineMissing(f"keep_float.blocks patterns are matched with RE2: install {RE2_DISTRIBUTION} "
                                   f"(pip install {RE2_DISTRIBUTION})") from error
    problem = _repeat_problem(pattern)
    if problem is None and not pattern.isascii():
        try:
            pattern.encode("utf-8")  # RE2 reads UTF-8: a lone surrogate (YAML's "\ud800") has none
        except UnicodeEncodeError as error:
            problem = f"character {error.object[error.start]!r} at {error.start} is not valid Unicode text"
    if problem is not None:
        raise PatternError(problem)
    options = re2.Options()
    options.log_errors = False  # RE2 would also print each refusal on stderr
    options.never_capture = True
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        raise PatternError(reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)) from None


def _repeat_problem(pattern: str) -> str | None:
    """A `{n}`, `{n,}`, `{n,m}` or `{,m}` RE2 would read as literal text though Python's re repeats (no lower count,
    a leading zero, a count over 1000): why, or None."""
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 1  # the escaped character is skipped too
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += 1 if pattern[i + 1:i + 2] == "^" else 0
            i += 1 if pattern[i + 1:i + 2] == "]" else 0  # `[]...]` and `[^]...]`: this ] is a member
        elif char == "{":
            count = _COUNT.match(pattern, i)
            if count is not None and (count["low"] or count["high"]):
                if not count["low"]:
                    return f"repetition {count[0]} has no lower count: write {{0,{count['high']}}}"
                if any(len(n or "") > 1 and n.startswith("0") for n in (count["low"], count["high"])):
                    high = count["high"]
                    fixed = f"{_count(count['low'])}" + ("" if high is None else f",{_count(high) if high else ''}")
                    return f"repetition {count[0]} has a leading zero: write {{{fixed}}}"
                if max(_count(count["low"]), _count(count["high"])) > MAX_REPEAT:
                    return f"invalid repetition size: {count[0]} (RE2 repeats at most {MAX_REPEAT} times)"
        i += 1
    return None


def _count(digits: str | None) -> int:
    """A repetition count's digits in; its value, or MAX_REPEAT + 1 for any longer number (int() stops at 4300
    digits)."""
    digits = (digits or "").lstrip("0")
    return MAX_REPEAT + 1 if len(digits) > len(str(MAX_REPEAT)) else int(digits or 0)
