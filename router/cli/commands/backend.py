"""`route backend add`: one backend into an existing config file, the way `route init --backend`
writes a new one (the same blocks, router/cli/starter.py), keeping the rest of the file as written.

    route backend add openrouter                          # a provider's block, as route init writes it
    route backend add glm-5.2 --from openrouter --model z-ai/glm-5.2
    route backend add k2.6 --model kimi-k2.6 --base-url https://api.moonshot.ai/v1 --api-key-env MOONSHOT_API_KEY
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import ConfigToEdit, Json
from router.cli.output import Output

if TYPE_CHECKING:
    from pathlib import Path

    from router.config_loader import LoadedConfig

__all__ = ["add", "app"]

app = command_app("backend", help="Add a backend to an existing config (as `route init --backend` writes a new one).",
                  no_args_is_help=True)


@app.callback()
def _group() -> None:
    """A group of one command: the callback keeps `route backend add` a subcommand."""


def _choices_help() -> str:
    from router.cli.starter import CHOICES

    return "Start from this block of `route init` (renamed NAME): " + ", ".join(c.name for c in CHOICES) + "."


def _starting_point(name: str, start: str | None) -> tuple[dict[str, Any], list[str]]:
    """The keys and comment lines of the starter block `start`, or of a bare OpenAI-compatible
    server when none is named."""
    import yaml

    from backends.errors import UsageError
    from router.cli.starter import CHOICES

    if start is None:
        return {"kind": "openai", "model": name}, ["added by `route backend add`"]
    choice = next((c for c in CHOICES if c.name == start), None)
    if choice is None:
        known = ", ".join(c.name for c in CHOICES)
        raise UsageError(f"--from {start!r} is not a block route init knows; choose from {known}.")
    comments = [line.strip() for line in choice.block.splitlines() if line.strip().startswith("#")]
    return dict(yaml.safe_load(choice.block)[choice.name]), comments


def _require_base_url(name: str, fields: dict[str, Any]) -> None:
    from backends.errors import UsageError

    if fields.get("kind") == "openai" and not fields.get("base_url"):
        raise UsageError(f"backend {name!r} is an OpenAI-compatible server (kind openai), so it needs --base-url, "
                         "the URL its /v1 API is served at (e.g. https://openrouter.ai/api/v1); or start from a "
                         "provider's block with --from (see --help), or pass --kind litellm with a litellm model "
                         "string as --model.")


def _fields(name: str, start: str | None, overrides: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The backend's keys and the comment lines above them: a starter block with `overrides`
    applied, or the overrides alone (an OpenAI-compatible server by default)."""
    fields, comments = _starting_point(name, start)
    if start is not None and overrides.get("model") not in (None, fields.get("model")):
        # the block's price and latency prior are its own model's, not this one's
        fields = {k: v for k, v in fields.items() if k not in ("price", "latency")}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    _require_base_url(name, fields)
    return fields, comments


@app.command("add", help="Add a backend to an existing config file, keeping its comments and everything else. "
                         "NAME alone is one of route init's blocks (`route backend add openrouter`); otherwise "
                         "say where it is served.")
@handle_errors
def add(
    name: Annotated[str, typer.Argument(help="The backend's name, usable as `route -m NAME` and in consortia.")],
    start: Annotated[str | None, typer.Option("--from", help=_choices_help())] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="openai (default) | anthropic | litellm | ...")] = None,
    model: Annotated[str | None, typer.Option("--model", help="The model name the server expects (default: NAME).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Where it is served, e.g. http://127.0.0.1:8000/v1.")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        "--api-key-env", help="The environment variable holding its key (written as ${VAR}; never the key).")] = None,
    json_output: Json = False,
    config: ConfigToEdit = None,
) -> None:
    from router.consortium.userconfig import write_config

    out = Output(json_mode=json_output)
    path = _target(config)
    _require_config(path, start or name)
    _require_variable_name(api_key_env)
    overrides = {"kind": kind, "model": model, "base_url": base_url,
                 "api_key": f"${{{api_key_env}}}" if api_key_env else None}
    block = _block(name, start, overrides)
    text = path.read_text(encoding="utf-8")
    loaded = write_config(path, _checked(text, name, block, path))
    _report(out, name, path, loaded, json_output=json_output)


def _require_config(path: Path, starter: str) -> None:
    from backends.errors import UsageError

    if not path.is_file():
        raise UsageError(f"there is no config at {path} yet; `route init --backend {starter}` writes a new "
                         "one (or pass -c FILE to add to another file).")


def _require_variable_name(api_key_env: str | None) -> None:
    from backends.errors import UsageError

    # A `$` or a non-name is most likely the key itself, pasted: it is refused without echoing it.
    if api_key_env is not None and (api_key_env.startswith("$") or not api_key_env.replace("_", "").isalnum()):
        raise UsageError("--api-key-env takes the variable's name, such as OPENAI_API_KEY, and what was given is "
                         "not one (it is not repeated here, in case it is a key); the key itself never goes into "
                         "the config.")


def _block(name: str, start: str | None, overrides: dict[str, Any]) -> str:
    """The YAML block to add: route init's own block for NAME when nothing else is asked,
    else one written from the fields."""
    from router.backend_edit import backend_block
    from router.cli.starter import CHOICES

    if start is None and name in {c.name for c in CHOICES} and not any(overrides.values()):
        return next(c.block for c in CHOICES if c.name == name)  # verbatim, comments and all
    fields, comments = _fields(name, start, overrides)
    return backend_block(name, fields, comments)


def _report(out: Output, name: str, path: Path, loaded: LoadedConfig, *, json_output: bool) -> None:
    line = loaded.line_of("backends", name)
    if json_output:
        out.data({"added": name, "path": str(path), "line": line})
        return
    out.info(f"added backend [bold]{name}[/] to {path} (line {line}). `route doctor` checks it; "
             f"`route -m {name} \"...\"` and consortia can use it. No routing tier names it: add it to one in "
             "that file for `route \"...\"` to choose it.")
    variable = loaded.config.backends[name].api_key_env
    if variable:
        import os

        if not os.environ.get(variable):
            out.info(f"[yellow]note:[/] {variable} is not set; `export {variable}=...` before using it.")


def _checked(text: str, name: str, block: str, path) -> str:
    from router.backend_edit import add_backend
    from router.config_loader import parse_config

    parse_config(text, str(path))  # a broken file is reported with its line, not edited
    return add_backend(text, name, block)


def _target(config: str | None):
    from pathlib import Path

    from router.paths import user_config_file

    return Path(config) if config else user_config_file()
