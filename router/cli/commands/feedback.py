"""`route feedback ID good|bad`: the operator's verdict on a logged answer, a label that
`route calibrate --from-log` and routing.learn learn from (router/store/feedback.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config
from router.cli.output import Output

__all__ = ["app", "feedback"]

app = command_app()


@app.command("feedback")
@handle_errors
def feedback(
    request_id: Annotated[str, typer.Argument(help="the request's id as `route log` shows it, or its trace id")],
    verdict: Annotated[str, typer.Argument(help="good or bad")],
    config: Config = None,
) -> None:
    """Say whether a routed answer was good or bad; `route calibrate --from-log` learns from it."""
    from router.config_loader import load_config
    from router.store.choice import open_log
    from router.store.feedback import judge

    store = open_log(load_config(config))
    try:
        logged = judge(store, request_id, verdict, admin=True)  # the operator's own command: any request
    finally:
        store.close()
    Output().info(f"recorded {verdict} for request {logged}")
