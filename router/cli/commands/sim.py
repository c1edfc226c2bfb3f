"""`route sim`: the SIMULATED OpenAI-compatible model server (backends/simulator), for demos and tests."""

from __future__ import annotations

from typing import Annotated

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.output import Output

__all__ = ["app", "sim"]

app = command_app()


def _sim_profiles(path: str | None):
    """The simulator's profiles, each also able to judge as a consortium arbiter, so a consortium
    pointed at `route sim` gets well-formed (simulated) verdicts instead of parse fallbacks."""
    from dataclasses import replace

    from backends.simulator import DEFAULT_PROFILES, load_profiles
    from router.consortium.simulated import judge_when_asked

    respond = judge_when_asked()
    profiles = load_profiles(path) if path else dict(DEFAULT_PROFILES)
    return {name: replace(p, responder=p.responder or respond) for name, p in profiles.items()}


@app.command("sim", help="Run the SIMULATED OpenAI-compatible model server (for demos and tests).")
@handle_errors
def sim(
    port: Annotated[int, typer.Option("--port", help="8000 is vLLM's default, which config.yaml expects.")] = 8000,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    profiles: Annotated[str | None, typer.Option("--profiles", help="YAML file of model profiles.")] = None,
) -> None:
    from backends.simulator import serve

    Output().info(f"[bold yellow]SIMULATED[/] model server on http://{host}:{port}/v1 — answers are fake")
    serve(host=host, port=port, profiles=_sim_profiles(profiles))
