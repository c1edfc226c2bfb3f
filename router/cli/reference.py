"""The CLI and configuration references, written from the CLI and the config schema themselves,
so the documentation cannot drift from them.

    python -m router.cli.reference cli > docs/reference/cli.md                 # regenerate
    python -m router.cli.reference config > docs/reference/configuration.md
    python -m router.cli.reference consortium > docs/reference/consortium.md
    python -m router.cli.reference --check cli docs/reference/cli.md             # CI: exit 1 when it drifted

`cli`: every command and group of `route`, depth first, with its help, usage and options.
`config`: every key of the config file (router/config.py), with its type, default and meaning.
`consortium`: every key of a `consortia:` entry (router/consortium/spec.py), likewise.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer

__all__ = ["configuration", "consortium", "reference"]

_HEADER = """# CLI reference

Generated from the CLI itself (`python -m router.cli.reference cli`); CI regenerates it and fails
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


_CONFIG_HEADER = """# Configuration reference

Generated from the config schema itself (`python -m router.cli.reference config`, from
router/config.py); CI regenerates it and fails when it differs. Every key, its type, its
default and what it does; `config.yaml` in the repository is the shipped example, with comments.
A typo fails at load with the file, the line and a did-you-mean. A backend's `params:` and
`options:` are checked per kind ([below](#backend-kinds)); a consortium's keys are in
[consortium keys](consortium.md); a block for each common provider is in
[providers](../guide/providers.md).
"""


def _type(annotation: Any) -> str:
    """A field's type as a reader wants it: `fast` or `cheap` for a Literal, `float or none`."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in args)
    if annotation is type(None):
        return "none"
    if origin is not None:  # list[...], dict[...]: the container is what a config writer sees
        return {list: "list", dict: "mapping"}.get(origin, getattr(origin, "__name__", str(origin)))
    name = getattr(annotation, "__name__", str(annotation))
    return "section" if name.endswith("Config") or name.endswith("Prior") else name


def _config_rows(model: Any, prefix: str) -> Iterator[str]:
    from pydantic import BaseModel
    from pydantic_core import PydanticUndefined

    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        annotation = field.annotation
        nested = next((a for a in (annotation, *getattr(annotation, "__args__", ()))
                       if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if field.default is PydanticUndefined and field.default_factory is None:
            default = "required"
        elif field.default_factory is not None:
            default = ""
        else:
            default = "" if isinstance(field.default, BaseModel) else f"`{field.default!r}`"
        described = field.description or (nested.__doc__.strip().split("\n\n")[0] if nested is not None and nested.__doc__
                                           else "")
        what = " ".join(described.split()).replace("|", "/")
        yield f"| `{key}` | {_type(annotation)} | {default} | {what} |"
        if nested is not None and nested.__name__ != "ConsortiumConfig":
            inner = f"{key}[].".replace("[].", "[i].") if getattr(annotation, "__origin__", None) is list else f"{key}."
            if getattr(annotation, "__origin__", None) is dict:
                inner = f"{key}.NAME."
            yield from _config_rows(nested, inner)


def _fields(model: Any) -> str:
    names = [f"`{name}`" for name in model.model_fields]
    return ", ".join(names) or "none"


def _kinds() -> list[str]:
    """`kind:` values, what each calls and needs, and the `params:` / `options:` it accepts."""
    from backends.registry import kind_of, kinds

    lines = ["## Backend kinds", "", "`backends.NAME.kind` is one of these; `params:` and `options:` accept the "
             "keys listed (anything else a provider takes goes in `passthrough:`, sent verbatim).", ""]
    for name in kinds():
        kind = kind_of(name)
        lines += [f"### `{name}`", "", f"{kind.summary}.", "", f"- needs: {kind.needs}",
                  f"- `params:` {_fields(kind.params)}", f"- `options:` {_fields(kind.options)}", ""]
    return lines


def configuration() -> str:
    """Every key of the config file as a Markdown table, then the backend kinds."""
    from router.config import Config

    rows = list(_config_rows(Config, ""))
    return "\n".join([_CONFIG_HEADER, "| key | type | default | what |", "|---|---|---|---|", *rows, "",
                      *_kinds()]).rstrip() + "\n"


_CONSORTIUM_HEADER = """# Consortium reference

Generated from the consortium schema itself (`python -m router.cli.reference consortium`, from
router/consortium/spec.py); CI regenerates it and fails when it differs. Every key of an entry
of `consortia:`, its type, its default and what it does; [consortia](../guide/consortia.md) shows
them at work (ranking, synthesis, quorum, budgets, nesting). A typo fails at load with the file,
the line and a did-you-mean.
"""


def consortium() -> str:
    """Every key of a `consortia:` entry, then of a member's long form, as Markdown tables."""
    from router.consortium.spec import ConsortiumConfig, MemberSpec

    head = ["| key | type | default | what |", "|---|---|---|---|"]
    entry = [row for row in _config_rows(ConsortiumConfig, "") if not row.startswith("| `members[i].")]
    member = list(_config_rows(MemberSpec, ""))
    return "\n".join([
        _CONSORTIUM_HEADER, "## `consortia.NAME`", "", *head, *entry, "",
        "## A member's long form", "",
        "`members:` takes `NAME`, `NAME*N` (N samples of NAME: `*` because model names may contain colons, "
        "`llama3:8b`) or this mapping, for a member with its own system prompt or temperature: "
        "`{model: k2.6, n: 3, temperature: 0.9}`.", "", *head, *member, ""]).rstrip() + "\n"


_KINDS = {"cli": reference, "config": configuration, "consortium": consortium}


def main(argv: list[str]) -> int:
    check = argv[:1] == ["--check"]
    args = argv[1:] if check else argv
    if len(args) != (2 if check else 1) or args[0] not in _KINDS:
        print("usage: python -m router.cli.reference [--check] cli|config|consortium [FILE]", file=sys.stderr)
        return 2
    text = _KINDS[args[0]]()
    if not check:
        sys.stdout.write(text)
        return 0
    with open(args[1], encoding="utf-8") as file:
        if file.read() == text:
            return 0
    print(f"{args[1]} is out of date: regenerate it with `python -m router.cli.reference {args[0]} > {args[1]}`",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
