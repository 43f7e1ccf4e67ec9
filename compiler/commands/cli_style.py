"""How `qas --help` looks: typer's command classes in; help that shows flags as flags (`--check`, not
`--check <bool>`) and arguments by name (`SPEC`, not `{spec}`) out, with `-h` beside `--help`.

Typer (0.2x, rich help) prints a type after every option, flags and --help included, and wraps required
arguments in braces on the usage line; the classes here undo both and nothing else. Arguments get their
upper-case name from `metavar=` in cli.py.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def _flags_without_type(params: list[Any]) -> list[Any]:
    """A command's parameters in; the same, each flag (--help too) given an empty metavar so no type shows."""
    for param in params:
        if getattr(param, "is_flag", False) and getattr(param, "metavar", None) is None:
            param.metavar = ""
    return params


def _unbraced(pieces: list[str]) -> list[str]:
    """Usage pieces in; `{SPEC}` (typer's mark of a required argument) as `SPEC` out, the rest as they are."""
    return [piece[1:].replace("}", "", 1) if piece.startswith("{") and "}" in piece else piece for piece in pieces]


class Command(TyperCommand):
    """A qas subcommand: flags shown without a type, arguments by name on the usage line."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _unbraced(super().collect_usage_pieces(ctx))


class Group(TyperGroup):
    """The `qas` command itself: its flags (--version, --help, completion) shown without a type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))
