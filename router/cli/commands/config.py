"""`route config path|show`: which config is in use, and what it says.

A pip-only user has no config.yaml to read: `route config show` prints the one in use, the
embedded default included, and `route config path` says where it came from.
"""

from __future__ import annotations

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json
from router.cli.output import Output

__all__ = ["app", "path_", "show"]

app = command_app("config", help="The config in use: where it comes from, and what it says.", no_args_is_help=True)


@app.command("path", help="Where the config in use comes from (stdout), and the search order (stderr).")
@handle_errors
def path_(config: Config = None, json_output: Json = False) -> None:
    from router.config_loader import find_config
    from router.paths import user_config_file

    out = Output(json_mode=json_output)
    found = find_config(config)
    shown = str(found) if found is not None else "(embedded default)"
    if json_output:
        out.data({"path": str(found) if found else None, "user_config": str(user_config_file())})
        return
    out.text(shown, end="\n")
    out.info(f"search order: --config, $ROUTE_CONFIG, ./config.yaml, {user_config_file()}, "
             "then the default embedded in the package ($ROUTE_HOME moves the user config and data).")


@app.command("show", help="Print the config in use, the embedded default included (--json: as parsed).")
@handle_errors
def show(config: Config = None, json_output: Json = False) -> None:
    from router.config_loader import _embedded_text, find_config, load_config

    out = Output(json_mode=json_output)
    loaded = load_config(config)
    if json_output:
        out.data({"path": loaded.path, "config": loaded.config.model_dump(mode="json")})
        return
    found = find_config(config)
    out.info(f"[dim]# {loaded.path}[/]")
    out.text(found.read_text(encoding="utf-8") if found is not None else _embedded_text())
