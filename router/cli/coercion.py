"""Parameter values without pydantic where none is needed, so a command starts fast.

Typer (0.2x) turns each command-line value into its Python type with a pydantic TypeAdapter it
builds per parameter, even for an option left out; that imports pydantic and generates schemas
(about 0.1 s, more than `route score` spends on anything but scoring). Here the plain cases
are done directly: an option left out (None), text, a number in plain digits within its range,
a path with no checks asked of it. Every other value (a bad number, a choice, a list) goes to
typer's own coercion, built on first use, so its results and error messages stay typer's.
`tests/test_cli_map.py` checks `route score` imports no pydantic; the CLI tests check the rest.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

__all__ = ["without_pydantic"]

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_NUMBERS: dict[Any, tuple[re.Pattern[str], Any]] = {int: (_INT, int), float: (_FLOAT, float)}


class _Plain:
    """A parameter's runtime coercion (typer's `RuntimeParam` contract: `coerce`)."""

    def __init__(self, descriptor: Any) -> None:
        self._descriptor = descriptor
        self._typer: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if isinstance(value, str):
            plain = self._plain(value)
            if plain is not None:
                return plain
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self._descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)

    def _plain(self, value: str) -> Any:
        """The value as typer would make it, or None where typer's own coercion must decide."""
        kind, info = self._descriptor.annotation, self._descriptor.parameter_info
        if info.parser is not None or getattr(info, "clamp", False):
            return None
        if kind is str:
            return value
        number = _NUMBERS.get(kind)
        if number is not None and number[0].fullmatch(value):
            return _within(number[1](value), info)
        if kind is Path and _unchecked(info):
            return _path(value, info)
        return None


def _within(number: float, info: Any) -> float | None:
    """`number` when it is in the parameter's range; None lets typer word the refusal."""
    if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
        return None
    return number


def _path(value: str, info: Any) -> Path | None:
    if info.readable and os.path.exists(value) and not os.access(value, os.R_OK):
        return None  # typer refuses an unreadable file in its own words
    return Path(value)


def _unchecked(info: Any) -> bool:
    """A path parameter that asks for no check beyond typer's default `readable`."""
    asked = (info.exists, info.resolve_path, not info.file_okay, not info.dir_okay, info.writable,
             info.path_type is not None, info.allow_dash)
    return not any(asked)


def without_pydantic(command: Any, *, subcommands: bool = True) -> Any:
    """`command` (and its subcommands) with plain values coerced directly, its help option (made
    on first use) included. A typer without per-parameter runtime coercion (older than 0.2x,
    click types) is left as it is."""
    if getattr(command, "_route_plain_values", False):
        return command
    _plain(command.params)
    made_help = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = made_help(ctx)
        _plain([option] if option is not None else [])
        return option

    command.get_help_option = get_help_option
    command._route_plain_values = True
    for sub in getattr(command, "commands", {}).values() if subcommands else ():
        without_pydantic(sub)
    return command


def _plain(params: Any) -> None:
    for param in params:
        if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = _Plain(param.type_descriptor)
