"""The `route` command: `route "prompt"` asks; subcommands manage everything else.

Kept light on purpose: nothing here imports httpx, litellm, pydantic or torch, and only the
command being run is imported and built: `route W` lives in router/cli/commands/W.py, and the
table of commands (router/cli/commands/__init__.py) is what `route --help` lists.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from router.cli.coercion import without_pydantic
from router.cli.commands import COMMANDS
from router.cli.dispatch import AskFirst, NotAPrompt, dispatch
from router.cli.errors import EXIT_USAGE, fail

__all__ = ["app", "run"]


class _Commands(Mapping[str, Any]):
    """The root's commands, by name from the table; each one's module is imported and its command
    built the first time it is looked up (typer reads every parameter's annotations to build one)."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in COMMANDS:
            raise KeyError(name)
        if name not in self._built:
            module = importlib.import_module(f"router.cli.commands.{name}")
            self._built[name] = without_pydantic(typer.main.get_command(module.app))
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class _DefaultToAsk(TyperGroup):
    """`route "prompt"` and `route --explain "prompt"` mean `route ask ...`; see router/cli/dispatch.py."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands()  # type: ignore[assignment]  # read-only: every command is in the table

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # Any: typer may vendor its own click
        without_pydantic(self, subcommands=False)  # its own options (--version): the commands build on use
        try:
            routed = dispatch(self, args, completing=ctx.resilient_parsing)
        except NotAPrompt as exc:
            if ctx.resilient_parsing:  # shell completion: offer what there is, say nothing
                return super().parse_args(ctx, args)
            if isinstance(exc, AskFirst) and _confirmed(exc):
                return super().parse_args(ctx, exc.routed)
            fail(str(exc), "UsageError", json_mode="--json" in args)
            ctx.exit(EXIT_USAGE)
        return super().parse_args(ctx, routed)

    def format_usage(self, ctx, formatter) -> None:
        formatter.write_usage("route", '[OPTIONS] "PROMPT"  |  route COMMAND [ARGS]...')

    def format_commands(self, ctx, formatter) -> None:
        """The default command's options first: `route -m NAME "..."` is how most people ask. Then
        every command's summary from the table, shortened as click shortens a command's help,
        without importing the commands."""
        ask = self.commands.get("ask")
        options = [p for p in (ask.params if ask else ()) if getattr(p, "param_type_name", None) == "option"]
        rows = [record for p in options if (record := p.get_help_record(ctx))]
        if rows:
            with formatter.section('Ask options (route [OPTIONS] "PROMPT", the same as route ask)'):
                formatter.write_dl(rows)
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        shorten = TyperGroup.get_short_help_str  # click's own rule, applied to a stand-in for each command
        summaries = [(name, shorten(SimpleNamespace(short_help=None, help=text, deprecated=False), limit))  # type: ignore[arg-type]
                     for name, text in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(summaries)


def _confirmed(exc: AskFirst) -> bool:
    """At a terminal, whether the user wants the word sent as a prompt after all; in a script
    (stdin or stderr not a terminal) no one can say, so no."""
    import sys

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    word = exc.word
    try:
        return typer.confirm(f"{word!r} is not a route command (it is one of llm's, or another tool's; `route --help` "
                             f"lists route's). Send {word!r} to a model as a prompt?", default=False, err=True)
    except (typer.Abort, EOFError, KeyboardInterrupt):
        return False


app = typer.Typer(
    cls=_DefaultToAsk,
    help=(
        'Latency-aware LLM router. `route "prompt"` scores the prompt offline and sends it to the '
        "fastest backend that is good enough; `route -m NAME` forces a backend or consortium; "
        '`route --explain "prompt"` shows the decision without calling a model. '
        "Exit codes: 0 ok, 2 usage or config error, 3 no backend could answer, 130 interrupted, 141 output "
        "closed early (`| head`)."
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


def run() -> None:
    app(prog_name="route")


if __name__ == "__main__":  # pragma: no cover
    run()
