"""`route init`: write a starter config, asking which backends (or told with --backend/--yes).

The templates are router/cli/starter.py; the questions go to stderr and the answers come from
stdin, so a script can answer them, and one that cannot gets a message naming --yes/--backend.
"""

from __future__ import annotations

from typing import Annotated

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Json
from router.cli.output import Output

__all__ = ["app", "init"]

app = command_app()


def _backend_help() -> str:
    from router.cli.starter import PROVIDERS, STARTERS

    return (f"A backend to write, by name; repeat. Skips the questions. {', '.join(c.name for c in STARTERS)}, "
            f"or a provider (docs/guide/providers.md): {', '.join(c.name for c in PROVIDERS)}.")


_BACKEND_HELP = _backend_help()


def _no_answers() -> str:
    from router.cli.starter import CHOICES

    defaults = ", ".join(c.name for c in CHOICES if c.default)
    known = ", ".join(c.name for c in CHOICES)
    return ("route init asks one question per backend and reads the answers from stdin, but stdin is not a "
            "terminal and ran out of answers. Run it with --yes to write the default backends "
            f"({defaults}), or name each backend you want with --backend ({known}; repeat it), "
            "e.g. `route init --backend sim` for the simulator alone.")


def _ask_backends(out: Output) -> list[str]:
    """One yes/no question per starter backend, then which providers to add, on stderr; answers
    come from stdin."""
    import sys

    from backends.errors import UsageError
    from router.cli.starter import PROVIDERS, STARTERS

    out.info("Which backends should the config have? (Enter keeps the default in capitals.)")
    try:
        chosen = [c.name for c in STARTERS
                  if typer.confirm(f"  {c.name}: {c.question}?", default=c.default, err=True)]
        out.info("Providers and local servers (docs/guide/providers.md): "
                 + ", ".join(f"{c.name}" for c in PROVIDERS))
        more = typer.prompt("  add which? (names separated by commas; Enter for none)", default="",
                            show_default=False, err=True)
    except typer.Abort:
        if sys.stdin.isatty():
            raise  # Ctrl-C or Ctrl-D at a terminal: the user stopped on purpose
        out.err.line()  # the unanswered question has no newline of its own
        raise UsageError(_no_answers()) from None
    added = [name.strip() for name in more.replace(" ", ",").split(",") if name.strip()]
    _check_known(added)
    return chosen + [name for name in added if name not in chosen]


def _check_known(backends: list[str]) -> None:
    from backends.errors import UsageError
    from router.cli.starter import CHOICES

    known = [c.name for c in CHOICES]
    unknown = [b for b in backends if b not in known]
    if unknown:
        raise UsageError(f"backend {unknown[0]!r} is not one route init knows; choose from {', '.join(known)}.")


def _chosen(backends: list[str], yes: bool, out: Output) -> list[str]:
    """--backend names, else the defaults (--yes), else the user's answers."""
    import sys

    from backends.errors import UsageError
    from router.cli.starter import CHOICES

    _check_known(backends)
    if backends or yes:
        return backends or [c.name for c in CHOICES if c.default]
    if sys.stdin is None or sys.stdin.closed:
        raise UsageError(_no_answers())
    return _ask_backends(out)


@app.command("init", help="Write a starter config (asks which backends; --backend NAME/--yes to skip asking).")
@handle_errors
def init(
    backend: Annotated[list[str] | None, typer.Option(
        "--backend", "-b", help=_BACKEND_HELP)] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="No questions: the default backends.")] = False,
    path: Annotated[str | None, typer.Option("--path", help="Where to write (default: the user config file).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    json_output: Json = False,
) -> None:
    from pathlib import Path

    from backends.errors import UsageError
    from router.cli.starter import starter_config
    from router.consortium.userconfig import write_config
    from router.paths import user_config_file

    out = Output(json_mode=json_output)
    target = Path(path) if path else user_config_file()
    if target.exists() and not force:
        raise UsageError(f"{target} already exists; pass --force to replace it, or --path to write elsewhere.")
    names = _chosen(list(backend or []), yes, out)
    if not names:
        raise UsageError("no backend chosen, so there is nothing to route to; choose at least one.")
    write_config(target, starter_config(names))  # validated as a whole before it is written
    if json_output:
        out.data({"path": str(target), "backends": names})
    else:
        out.info(f"wrote {target} with {', '.join(names)}. Next: `route doctor` checks them, "
                 '`route --explain "hello"` shows the routing.')
