"""The CLI reference, written from the CLI itself, so the documentation cannot drift from it.

    python -m router.cli.reference > docs/reference/cli.md      # regenerate
    python -m router.cli.reference --check docs/reference/cli.md  # CI: exit 1 when it drifted

Every command and group of `route`, depth first, with its help, usage and options (names,
type, default, help), as Markdown.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer

__all__ = ["reference"]

_HEADER = """# CLI reference

Generated from the CLI itself (`python -m router.cli.reference`); CI regenerates it and fails
when it differs, so what is here is what `route` accepts. `route "PROMPT"` is `route ask "PROMPT"`:
the options of `ask` work without the word.
"""


# Typer may carry its own copy of click: commands and parameters are read by what they do, not
# by isinstance against the click this module would import.


def _context(command: Any, name: str | None = None) -> Any:
    return type(command).context_class(command, info_name=name)


def _commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    if hasattr(command, "list_commands"):
        for name in command.list_commands(_context(command)):
            sub = command.get_command(_context(command), name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _commands(sub, (*path, name))


def _row(param: Any, ctx: Any) -> str:
    """An option as `--help` describes it: its names with their metavar, and its help (the
    default and choices included), in one table row."""
    record = param.get_help_record(ctx)
    if record is None:
        return ""
    names, help_text = record
    return f"| `{names}` | {' '.join(help_text.split()).replace('|', '/')} |"


def _section(path: tuple[str, ...], command: Any) -> str:
    title = " ".join(("route", *path))
    ctx = _context(command, title)
    lines = [f"## `{title}`", ""]
    text = " ".join((command.help or "").split())
    if text:
        lines += [text, ""]
    lines += ["```", " ".join(command.collect_usage_pieces(ctx)).join([f"{title} ", ""]).strip(), "```", ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    rows = [_row(p, ctx) for p in command.params if p.param_type_name == "option" and not getattr(p, "hidden", False)]
    if arguments:
        lines += ["Arguments: " + ", ".join(f"`{(a.name or '').upper()}`" for a in arguments), ""]
    if any(rows):
        lines += ["| option | what |", "|---|---|", *filter(None, rows), ""]
    return "\n".join(lines)


def reference(app: Any = None) -> str:
    """The whole reference as Markdown."""
    if app is None:
        from router.cli.app import app
    root = typer.main.get_command(app)
    sections = [_section(path, command) for path, command in _commands(root, ()) if path]
    return "\n".join([_HEADER, *sections]).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = reference()
    if argv[:1] == ["--check"] and len(argv) == 2:
        with open(argv[1], encoding="utf-8") as file:
            if file.read() == text:
                return 0
        print(f"{argv[1]} is out of date with the CLI: regenerate it with `python -m router.cli.reference > {argv[1]}`",
              file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
