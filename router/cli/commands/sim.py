"""`route sim`: the SIMULATED OpenAI-compatible model server (backends/simulator), for demos and tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config
from router.cli.output import Output

__all__ = ["app", "sim", "unasked_profiles"]

app = command_app()


def unasked_profiles(profiles: Iterable[str], backends: Mapping[str, Any]) -> list[str]:
    """One sentence per profile no backend of the config asks for: the simulator is sent a
    backend's `model`, never its name, so a profile keyed otherwise is silently unused."""
    from router.simulator import backend_name_note

    models = {name: b.model for name, b in backends.items() if getattr(b, "model", None)}
    notes = []
    for profile in profiles:
        if profile in models.values():
            continue
        note = backend_name_note("profile", profile, models)
        if note:
            notes.append(note)
        else:
            notes.append(f"profile {profile!r} names no model the config in use sends (only a config of your own "
                         "that names it will use it)")
    return notes


def _warn_unasked(out: Output, profiles: Iterable[str], config: str | None) -> None:
    """Profiles the config in use (`-c`, else the search order) never asks for, said before serving; a
    config that cannot load says nothing, since the simulator serves any config."""
    from backends.errors import ConfigError
    from router.config_loader import load_config

    try:
        loaded = load_config(config)
    except ConfigError:
        return
    for note in unasked_profiles(profiles, loaded.config.backends):
        out.warn(f"{note} ({loaded.path})")


@app.command("sim", help="Run the SIMULATED OpenAI-compatible model server (for demos and tests).")
@handle_errors
def sim(
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="8000 is vLLM's default, which config.yaml expects; 0: any free port.")] = 8000,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    profiles: Annotated[str | None, typer.Option("--profiles", help="YAML file of model profiles.")] = None,
    config: Config = None,
) -> None:
    from backends.simulator import serve
    from backends.threaded_server import bind_socket
    from router.simulator import sim_profiles

    out = Output()
    served = sim_profiles(profiles)
    if profiles:
        _warn_unasked(out, served, config)
    sock = bind_socket(host, port)  # a busy port: a usage error (exit 2), as `route serve` says it
    out.info(f"[bold yellow]SIMULATED[/] model server on http://{host}:{sock.getsockname()[1]}/v1 — answers are fake")
    serve(host=host, port=port, profiles=served, sock=sock)
