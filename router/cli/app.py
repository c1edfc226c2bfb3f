"""The `route` command: `route "prompt"` asks; subcommands manage everything else.

Kept light on purpose: nothing here imports httpx, litellm, pydantic or torch, so
`route --help` starts fast. Each command group lives in its own module and is registered here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["app", "run", "handle_errors"]

EXIT_OK, EXIT_USAGE, EXIT_NO_BACKEND = 0, 2, 3
_DEFAULT_COMMAND = "ask"
_PASSTHROUGH = {"--help", "-h", "--version", "--install-completion", "--show-completion"}


class _DefaultToAsk(TyperGroup):
    """`route "prompt"` and `route --explain "prompt"` mean `route ask ...`."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in _PASSTHROUGH):
            args = [_DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx, formatter) -> None:
        formatter.write_usage("route", '[OPTIONS] "PROMPT"  |  route COMMAND [ARGS]...')


app = typer.Typer(
    cls=_DefaultToAsk,
    help=(
        'Latency-aware LLM router. `route "prompt"` scores the prompt offline and sends it to the '
        "fastest backend that is good enough; `route -m NAME` forces a backend or consortium; "
        '`route --explain "prompt"` shows the decision without calling a model. '
        "Exit codes: 0 ok, 2 usage or config error, 3 no backend could answer."
    ),
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Map our errors to a one-paragraph message and an exit code, never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from backends.errors import RouteError
        from router.cli.output import Output

        json_mode = bool(kwargs.get("json_output"))
        try:
            return command(*args, **kwargs)
        except RouteError as exc:
            Output(json_mode=json_mode).error(str(exc), kind=type(exc).__name__)
            raise typer.Exit(getattr(exc, "exit_code", 1)) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper


def _register_commands() -> None:
    # Each module imports only typer at the top; its command bodies import what they need.
    from router.cli import admin, ask, consortium_cmds, engine_cmds, scoring_cmds, serve_cmds

    for module in (ask, admin, scoring_cmds, consortium_cmds, serve_cmds, engine_cmds):
        module.register(app)


_register_commands()


def run() -> None:
    app(prog_name="route")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
