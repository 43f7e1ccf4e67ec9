"""Where spec keys belong: an unknown key and the mapping it was written in; a hint and the path(s) it meant out.

Read from the spec schema itself, so a key that exists (or nearly exists) in another section gets a hint
naming that section: `n_trials` at the top level is `search.n_trials`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from compiler.diagnostics import YamlPath
from compiler.front.suggest import closest
from compiler.resources import load_schema

SPEC_SCHEMA = "spec.schema.json"


@cache
def key_paths() -> dict[str, tuple[YamlPath, ...]]:
    """Every key the spec schema names, with the paths (from the top) where it may be written."""
    schema = load_schema(SPEC_SCHEMA)
    found: dict[str, list[YamlPath]] = {}

    def walk(node: Any, path: YamlPath) -> None:
        if isinstance(node, dict) and "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        if not isinstance(node, dict):
            return
        for key, sub in node.get("properties", {}).items():
            found.setdefault(key, []).append((*path, key))
            walk(sub, (*path, key))
        for branch in ("then", "else"):  # a key that takes a string or a mapping (storage, output.launch)
            walk(node.get(branch), path)

    walk(schema, ())
    return {key: tuple(paths) for key, paths in found.items()}


def _dotted(path: YamlPath) -> str:
    return ".".join(str(p) for p in path)


def _section(path: YamlPath) -> str:
    return f"under {_dotted(path[:-1])}" if len(path) > 1 else "at the top level of the spec"


def placement(key: str, where: YamlPath, known: list[str]) -> tuple[str | None, tuple[YamlPath, ...]]:
    """An unknown key, the path of its mapping and that mapping's keys in; (hint, the paths it probably meant) out.

    Preference: the same key in another case here; the same key in another section; a near miss here;
    a near miss in another section; else the keys allowed here.
    """
    lowered = {k.lower(): k for k in known}
    if key.lower() in lowered:
        return f"did you mean {lowered[key.lower()]!r}?", ((*where, lowered[key.lower()]),)
    elsewhere = {name: paths for name, paths in key_paths().items() if name not in known}
    exact = next((name for name in elsewhere if name.lower() == key.lower()), None)
    if exact is not None:
        paths = elsewhere[exact]
        hint = (f"{exact!r} belongs {' or '.join(_section(p) for p in paths)}: write it as "
                f"{' or '.join(_dotted(p) for p in paths)}")
        return hint, paths
    near = closest(key, known)
    if near is not None:
        return f"did you mean {near!r}?", ((*where, near),)
    near = closest(key, list(elsewhere))
    if near is not None:
        paths = elsewhere[near]
        hint = (f"did you mean {' or '.join(_dotted(p) for p in paths)}? ({near!r} belongs "
                f"{' or '.join(_section(p) for p in paths)})")
        return hint, paths
    if known and len(known) <= 12:
        return "expected one of: " + ", ".join(repr(k) for k in known), ()
    return None, ()
