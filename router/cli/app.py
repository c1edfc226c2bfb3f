"""The `route` command: `route "prompt"` asks; subcommands manage everything else.

Kept light on purpose: nothing here imports httpx, litellm, pydantic or torch, so
`route --help` starts fast. Each command group lives in its own module and is registered here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from router.cli.dispatch import NotAPrompt, dispatch

__all__ = ["app", "run", "handle_errors"]

EXIT_OK, EXIT_USAGE, EXIT_NO_BACKEND, EXIT_INTERRUPTED = 0, 2, 3, 130


class _DefaultToAsk(TyperGroup):
    """`route "prompt"` and `route --explain "prompt"` mean `route ask ...`; see router/cli/dispatch.py."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # Any: typer may vendor its own click
        try:
            routed = dispatch(self, args, completing=ctx.resilient_parsing)
        except NotAPrompt as exc:
            if ctx.resilient_parsing:  # shell completion: offer what there is, say nothing
                return super().parse_args(ctx, args)
            _fail(str(exc), "UsageError", json_mode="--json" in args)
            ctx.exit(EXIT_USAGE)
        return super().parse_args(ctx, routed)

    def format_usage(self, ctx, formatter) -> None:
        formatter.write_usage("route", '[OPTIONS] "PROMPT"  |  route COMMAND [ARGS]...')

    def format_commands(self, ctx, formatter) -> None:
        """The default command's options first: `route -m NAME "..."` is how most people ask."""
        ask = self.commands.get("ask")
        options = [p for p in (ask.params if ask else ()) if getattr(p, "param_type_name", None) == "option"]
        rows = [record for p in options if (record := p.get_help_record(ctx))]
        if rows:
            with formatter.section('Ask options (route [OPTIONS] "PROMPT", the same as route ask)'):
                formatter.write_dl(rows)
        super().format_commands(ctx, formatter)


app = typer.Typer(
    cls=_DefaultToAsk,
    help=(
        'Latency-aware LLM router. `route "prompt"` scores the prompt offline and sends it to the '
        "fastest backend that is good enough; `route -m NAME` forces a backend or consortium; "
        '`route --explain "prompt"` shows the decision without calling a model. '
        "Exit codes: 0 ok, 2 usage or config error, 3 no backend could answer."
    ),
    no_args_is_help=False,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from router import __version__

        typer.echo(f"route {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """The group itself does nothing: every command takes its own options (see router/cli/dispatch.py)."""


def _fail(message: str, kind: str, *, json_mode: bool) -> None:
    from router.cli.output import Output

    Output(json_mode=json_mode).error(message, kind=kind)


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Map errors to a one-paragraph message and an exit code, never a traceback: ours carry
    their exit code (2 usage/config, 3 no backend); a file the user named that cannot be read or
    written is 2; Ctrl-C is one line and 130; anything else is a bug, shown in one line (set
    ROUTE_DEBUG=1 for the traceback), exit 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from backends.errors import RouteError

        json_mode = bool(kwargs.get("json_output") or kwargs.get("json_out"))
        try:
            return command(*args, **kwargs)
        except RouteError as exc:
            _fail(str(exc), type(exc).__name__, json_mode=json_mode)
            raise typer.Exit(getattr(exc, "exit_code", 1)) from None
        except KeyboardInterrupt:
            _cancelled(json_mode)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except OSError as exc:
            _fail(f"{exc}. Check the path and its permissions.", type(exc).__name__, json_mode=json_mode)
            raise typer.Exit(EXIT_USAGE) from None
        except Exception as exc:
            if os.environ.get("ROUTE_DEBUG") or type(exc).__module__.startswith(("click", "typer")):
                raise  # click's and typer's own exits and usage errors are theirs to show
            _fail(f"{exc!r}: this is a bug in route; run again with ROUTE_DEBUG=1 for the traceback "
                  "and report it.", "InternalError", json_mode=json_mode)
            raise typer.Exit(1) from None

    return wrapper


def _cancelled(json_mode: bool) -> None:
    """Ctrl-C: one line on stderr (and the error document on stdout with --json)."""
    sys.stderr.write("route: cancelled\n")
    sys.stderr.flush()
    if json_mode:
        from router.cli.output import Output

        Output(json_mode=True).data({"error": {"type": "cancelled", "message": "interrupted (Ctrl-C)"}})


def _register_commands() -> None:
    # Each module imports only typer at the top; its command bodies import what they need.
    from router.cli import (
        admin,
        ask,
        config_cmds,
        consortium_cmds,
        engine_cmds,
        learn_cmds,
        scoring_cmds,
        serve_cmds,
    )

    for module in (ask, admin, config_cmds, scoring_cmds, learn_cmds, consortium_cmds, serve_cmds, engine_cmds):
        module.register(app)


_register_commands()


def run() -> None:
    app(prog_name="route")


if __name__ == "__main__":  # pragma: no cover
    run()
