"""The map of `route`'s commands: `route W ...` lives in `router/cli/commands/W.py`, whose `app`
declares the command (or the group and its subcommands) as top-level functions.

COMMANDS lists them in the order `route --help` shows them, each with its summary (the first
paragraph of its help), so that `route --help` and the dispatcher know every command without
importing one; only the command being run is imported and built (router/cli/app.py).
`tests/test_cli_map.py` checks that each summary is its command's help and each module exists.
"""

from __future__ import annotations

from typing import Any

import typer

__all__ = ["COMMANDS", "command_app"]

COMMANDS: dict[str, str] = {
    "ask": 'Ask a question (the default: `route "prompt"` is `route ask "prompt"`).',
    "chat": "A conversation at the terminal, routed as one session (its tier only moves up, on evidence); "
            "--continue goes on with the last one.",
    "models": "List configured backends and consortia, with key status (never the key).",
    "doctor": "Check each backend: key present, server reachable. Prints no keys.",
    "sim": "Run the SIMULATED OpenAI-compatible model server (for demos and tests).",
    "init": "Write a starter config (asks which backends; --backend NAME/--yes to skip asking).",
    "score": 'Score prompts: reads {"id", "prompt"} lines, writes {"id", "score"} lines.',
    "eval": "Routing quality of the scorer beside random, length, always-local/hosted and oracle.",
    "calibrate": "Adapt the weights in use to labelled prompts of your own; written only when they route better.",
    "feedback": "Say whether a routed answer was good or bad; `route calibrate --from-log` learns from it.",
    "serve": "Serve the router as an OpenAI-compatible API (model `auto`, each backend, each consortium) for "
             "editors and agents. Ctrl-C drains in-flight streams, then stops.",
    "stats": "Per backend: requests, share, p50/p95 latency, time to first token, tokens/s, cost, error rate, "
             "and the total spend, from the request log.",
    # groups: `route W SUBCOMMAND`
    "config": "The config in use: where it comes from, and what it says.",
    "learn": "What routing learned from its own traffic: status, history, rollback.",
    "consortium": "Named consortia: N models answer, a fast arbiter ranks or synthesizes.",
    "backend": "Add a backend to an existing config (as `route init --backend` writes a new one).",
    "log": "The request log (CLI, Python API and server alike): the last requests, or one in full with "
           "`route log show ID`.",
    "engine": "The local DiffusionGemma engine: serve it (needs the `local` extra), inspect a checkpoint "
              "(needs nothing).",
}


def command_app(name: str | None = None, **group: Any) -> typer.Typer:
    """The Typer a command module declares on: `name` and `group` settings (help, no_args_is_help)
    for a group, nothing for a single command. Built alone, so it carries the root's settings."""
    return typer.Typer(name=name, add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                       **group)
