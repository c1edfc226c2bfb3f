"""Sessions of real clients, from their recorded bodies (tests/data/clients) through `route serve`:
a derived session is one task, not one client's boilerplate. Aider starts every conversation with
the same example turns and appends the same format rules to every user turn; Codex's chat wire
starts with AGENTS.md and an environment turn: before, every task of such a client shared one
session (the first user message was the boilerplate), so an easy task could be pinned to a hard
one's tier. Now two tasks are two sessions, and one task's second turn -- recorded on another day,
its system prompt's date and platform build changed -- is still its session.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from benchmarks.harness import wrapper
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parent / "data" / "clients"


@pytest.fixture(scope="module")
def client(sim):
    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0}

    config = {"backends": {"light": backend("m-light"), "heavy": backend("m-heavy")},
              "routing": {"tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                                    {"name": "heavy", "backends": ["heavy"]}]},
              "aliases": {"*": "auto"}, "log": {"enabled": False}}
    with RouteServer(Router(load_config(config), source="server")) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as http:
        yield http


def _session(client: httpx.Client, fixture: str, task: str | None = None) -> str:
    """The session `route serve` routes the recorded body in, with its task's words replaced by `task`."""
    record = json.loads((CORPUS / f"{fixture}.json").read_text())
    if task is None:
        body = json.dumps(record["body"]).encode()
    else:
        template = wrapper(CORPUS / f"{fixture}.json", loop=True)
        assert template is not None
        body = template.body(task)
    answer = client.post(record["path"], content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    return answer.headers["x-route-session"]


# (Claude Code and Codex's Responses wire name their session themselves: metadata.user_id, prompt_cache_key.)
@pytest.mark.parametrize("fixture", ["aider-anthropic-cache-thinking", "aider-chat-gpt-4.1", "aider-chat-o4-mini-hi",
                                     "codex-chat-0.80-tool-round-trip", "opencode-chat-reasoning-tool-round-trip"])
def test_two_tasks_of_one_client_are_two_sessions(client, fixture):
    one = _session(client, fixture, "Add type hints to every function in greet.py.")
    other = _session(client, fixture, "Explain what greet() returns for an empty name.")
    assert one.startswith("auto-") and other.startswith("auto-") and one != other
    assert _session(client, fixture, "Add type hints to every function in greet.py.") == one


def test_one_aider_task_keeps_its_session_into_its_second_turn(client):
    first = _session(client, "aider-anthropic-cache-thinking")  # "Make greet() say hello instead of hi."
    second = _session(client, "aider-anthropic-second-turn")  # the next day: "Now also add a docstring..."
    assert first == second
