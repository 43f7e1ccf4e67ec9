"""Resource limits on a spec's YAML: a byte count or the spec's text in; None, or the first limit it breaks as a
located Diagnostic, out.

A real spec is a few KB, under 300 nodes and about 6 levels deep. Beyond that the loader is the
attack surface: ruamel's composer and constructor recurse once per nesting level (5000 nested
`[` end in RecursionError), an alias is one object in ruamel's tree but a full copy once the
data is made plain (nine levels of nine aliases is 9**9 copies: the "billion laughs"), and
ruamel reads some tens of thousands of nodes a second, so a big file alone takes minutes.

`check_size` runs before the file is read; `check_structure` walks ruamel's event stream (its
parser is a state machine, not recursive, and builds no nodes) and stops at the first node that
crosses a limit, so a hostile spec is refused after reading only up to that node.
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml import YAML
from ruamel.yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
)
from ruamel.yaml.scanner import RoundTripScanner

from compiler.diagnostics import Diagnostic, diag

MAX_BYTES = 256 * 1024  # spec file size
MAX_DEPTH = 64  # nested mappings and sequences, counting what an alias names at the alias
MAX_NODES = 5_000  # keys, values and items, each alias counted as a copy of what it names

SIZE_HINT = "a spec is a few KB; keep data (samples, long lists of names) in files the spec points to"
DEPTH_HINT = ("a spec needs about 6 levels; flatten the structure (an alias counts as deep as what "
              "its anchor names, where it is used)")
NODES_HINT = (f"each alias counts as a full copy of what its anchor names (so aliases of aliases multiply), "
              f"and a spec may hold {MAX_NODES} nodes counted so; a real one has a few hundred")
SELF_HINT = "an alias may only name a node that ends before the alias"


def check_size(size: int, *, exact: bool = True) -> Diagnostic | None:
    """The spec file's size in bytes in (exact=False: only the bytes read so far); a QAS104 at 1:1 when over
    MAX_BYTES, else None."""
    if size <= MAX_BYTES:
        return None
    found = f"{size} bytes" if exact else "longer than that"
    return diag("QAS104", f"spec file is over the limit of {MAX_BYTES} bytes ({MAX_BYTES // 1024} KiB): {found}",
                hint=SIZE_HINT).located(1, 1)


class _TooDeep(Exception):
    def __init__(self, mark: object) -> None:
        super().__init__("too deep")
        self.mark = mark


class _DepthScanner(RoundTripScanner):
    """ruamel's round-trip scanner, stopping at a flow `[` or `{` that opens level MAX_DEPTH + 1.

    The parser asks the scanner to read ahead while a token may still start a simple key, and in
    `[[[[...` every `[` may, up to 1024 characters on: ruamel then rescans its pending keys at each
    token, so the parser's 65th event costs about a million steps. Stopping the scanner itself keeps
    a refusal at a few hundred. The depth it counts (open block collections, flow levels, and the
    one opening now) is a lower bound of the event check's (an indentless `- ` list pushes no
    indent), so it refuses nothing that check would accept.
    """

    def fetch_flow_sequence_start(self) -> None:
        self._check_depth()
        super().fetch_flow_sequence_start()

    def fetch_flow_mapping_start(self) -> None:
        self._check_depth()
        super().fetch_flow_mapping_start()

    def _check_depth(self) -> None:
        if len(self.indents) + self.flow_level + 1 > MAX_DEPTH:
            raise _TooDeep(self.reader.get_mark())


@dataclass
class _Open:
    """A mapping or sequence whose end event has not come yet."""

    anchor: str | None
    nodes: int = 1  # itself and everything in it so far, aliases expanded
    height: int = 1  # levels of collections, itself included


def check_structure(text: str) -> Diagnostic | None:
    """YAML text in; the first node that nests deeper than MAX_DEPTH or takes the expanded node count over MAX_NODES,
    located, or None.

    Syntax errors propagate as ruamel's MarkedYAMLError (the loader reports them as it always did);
    an undefined alias is left to ruamel's composer to report.
    """
    walk = _Walk()
    yaml = YAML(typ="rt")
    yaml.Scanner = _DepthScanner
    events = yaml.parse(text)
    try:
        for event in events:
            if isinstance(event, CollectionStartEvent):
                found = walk.open(event)
            elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
                walk.close()
                found = None
            elif isinstance(event, ScalarEvent):
                found = walk.scalar(event)
            elif isinstance(event, AliasEvent):
                found = walk.alias(event)
            else:
                found = None
            if found is not None:
                return _at(event, found)
    except _TooDeep as exc:
        return _at_mark(exc.mark, _too_deep())
    finally:
        events.close()
    return None


class _Walk:
    """The open collections, anchors and expanded node count of a walk over YAML events: open, scalar and alias take
    one event and give the diagnostic it breaks a limit with, or None; close ends the innermost collection."""

    def __init__(self) -> None:
        # anchor -> the collection it names while that is open, then (nodes, height); as in ruamel's
        # composer an anchor names its node from the node's start, and a later one of the same name wins
        self.anchors: dict[str, _Open | tuple[int, int]] = {}
        self.stack: list[_Open] = []
        self.total = 0

    def open(self, event: CollectionStartEvent) -> Diagnostic | None:
        if len(self.stack) + 1 > MAX_DEPTH:
            return _too_deep()
        self.total += 1
        if self.total > MAX_NODES:
            return _too_many()
        self.stack.append(_Open(event.anchor))
        if event.anchor is not None:
            self.anchors[event.anchor] = self.stack[-1]
        return None

    def close(self) -> None:
        done = self.stack.pop()
        if done.anchor is not None and self.anchors.get(done.anchor) is done:
            self.anchors[done.anchor] = (done.nodes, done.height)
        _add(self.stack, done.nodes, done.height)

    def scalar(self, event: ScalarEvent) -> Diagnostic | None:
        self.total += 1
        if self.total > MAX_NODES:
            return _too_many()
        if event.anchor is not None:
            self.anchors[event.anchor] = (1, 0)
        _add(self.stack, 1, 0)
        return None

    def alias(self, event: AliasEvent) -> Diagnostic | None:
        name = event.anchor
        named = self.anchors.get(name)
        if named is None:
            return None  # ruamel reports the undefined alias
        if isinstance(named, _Open):
            return diag("QAS106", f"alias *{name} is inside the node its anchor names: it would contain itself, "
                                  f"without end", hint=SELF_HINT)
        nodes, height = named
        if len(self.stack) + height > MAX_DEPTH:
            return diag("QAS105", f"alias *{name} nests {height} levels here, deeper than {MAX_DEPTH} in all",
                        hint=DEPTH_HINT)
        self.total += nodes
        if self.total > MAX_NODES:
            return diag("QAS106", f"alias *{name} stands for {nodes} nodes: with it the spec holds more than "
                                  f"{MAX_NODES} once aliases are expanded", hint=NODES_HINT)
        _add(self.stack, nodes, height)
        return None


def _add(stack: list[_Open], nodes: int, height: int) -> None:
    if stack:
        stack[-1].nodes += nodes
        stack[-1].height = max(stack[-1].height, height + 1)


def _too_many() -> Diagnostic:
    return diag("QAS106", f"the spec holds more than {MAX_NODES} nodes (keys, values and items, aliases expanded)",
                hint=NODES_HINT)


def _too_deep() -> Diagnostic:
    return diag("QAS105", f"nesting deeper than {MAX_DEPTH} levels", hint=DEPTH_HINT)


def _at(event: object, d: Diagnostic) -> Diagnostic:
    return _at_mark(event.start_mark, d)  # type: ignore[attr-defined]


def _at_mark(mark: object, d: Diagnostic) -> Diagnostic:
    return d.located(mark.line + 1, mark.column + 1)  # type: ignore[attr-defined]
