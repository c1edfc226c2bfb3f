"""Options that several commands take, declared once: the same names, the same parameter name
and the same help wherever they appear. `router/cli/dispatch.py` lets the global ones (`--json`,
`-c/--config`, `-q/--quiet`, `--no-log`) stand before or after the command.

    def stats(since: Since = None, json_output: Json = False, config: Config = None) -> None: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["Config", "ConfigToEdit", "Json", "JsonLines", "NoLog", "Quiet", "QuietServer", "Since", "Weights"]

Json = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
JsonLines = Annotated[bool, typer.Option("--json", help="One JSON object per line, prompts and answers included.")]

Config = Annotated[str | None, typer.Option("-c", "--config", help="Config file (default: search order).")]
# The commands that edit a config write the user config unless told otherwise, whatever is found first.
ConfigToEdit = Annotated[str | None, typer.Option(
    "-c", "--config", help="The config file to change (default: the user config).")]

Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="Only the answer; no notes on stderr.")]
QuietServer = Annotated[bool, typer.Option(
    "-q", "--quiet", help="No line per request on stderr (method, path, status, backend, time, and why it failed).")]
NoLog = Annotated[bool, typer.Option("--no-log", help="Do not write the request log.")]

Since = Annotated[str | None, typer.Option("--since", help="Only this recent: 30m, 1h, 2d.")]
Weights = Annotated[Path | None, typer.Option("--weights", "-w", help="weights file (default: the shipped one)")]
