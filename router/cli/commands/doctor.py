"""`route doctor`: is each backend's key present and its server reachable (router/doctor.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json
from router.cli.output import Output

__all__ = ["app", "doctor"]

app = command_app()


@app.command("doctor", help="Check each backend: key present, server reachable. Prints no keys.")
@handle_errors
def doctor(
    json_output: Json = False,
    config: Config = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per check.")] = 3.0,
) -> None:
    from router.config_loader import load_config
    from router.doctor import check_all
    from router.paths import user_config_file

    out = Output(json_mode=json_output)
    loaded = load_config(config)
    results = check_all(loaded.config, timeout_s=timeout)
    ok = all(r.ok for r in results)
    if json_output:
        out.data({"config": loaded.path, "user_config": str(user_config_file()),
                  "checks": [r.__dict__ for r in results], "ok": ok})
    else:
        out.info(f"config: {loaded.path}   (user config: {user_config_file()})")
        from rich.markup import escape

        for r in results:  # the report is data: stdout, so `route doctor | grep FAIL` finds it
            mark = "[green]ok[/]  " if r.ok else "[red]FAIL[/]"
            out.out.print(f"{mark} {escape(r.name):<18} {escape(r.detail)}")
    raise typer.Exit(0 if ok else 3)
