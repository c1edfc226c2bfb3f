"""A session is one task of one API key: another key that sends a victim's session id -- or the
very same conversation, which derives the same id -- gets a session of its own, and cannot move
the victim's to another tier. Through the real server on loopback, with keys; and a session id
that is too long or holds control characters is a 400 naming where it came from.
"""

from __future__ import annotations

import httpx
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.server.keys import server_keys

pytestmark = pytest.mark.integration

ALICE, BOB = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"
EASY = "hi there"
HARD = ("Prove that there are infinitely many primes p such that p + 2 is also prime, or explain precisely "
        "why the known sieve methods fail to do so, with the parity problem stated formally.")


@pytest.fixture
def served(sim, monkeypatch, tmp_path):
    monkeypatch.setenv("ALICE_KEY", ALICE)
    monkeypatch.setenv("BOB_KEY", BOB)

    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0}

    config = {"backends": {"light": backend("m-light"), "heavy": backend("m-heavy")},
              "routing": {"tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                                    {"name": "heavy", "backends": ["heavy"]}]},
              "log": {"enabled": False},
              "server": {"keys": {"alice": {"key": "${ALICE_KEY}"}, "bob": {"key": "${BOB_KEY}"}}}}
    router = Router(load_config(config), source="server")
    assert router.explain(EASY).tier == "light" and router.explain(HARD).tier == "heavy"
    with RouteServer(router, api_keys=server_keys(router.loaded, "127.0.0.1", None)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        yield client


def _ask(client: httpx.Client, key: str, messages: list[dict], session: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} | ({"x-session-id": session} if session else {})
    return client.post("/v1/chat/completions", json={"model": "auto", "messages": messages}, headers=headers)


def _tier(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    return answer.headers["x-route-tier"]


def _user(text: str) -> list[dict]:
    return [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": text}]


def _follow_up(first: str) -> list[dict]:
    return [*_user(first), {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "thanks, go on"}]


def test_another_key_sending_a_victims_session_id_gets_its_own_session(served):
    assert _tier(_ask(served, ALICE, _user(EASY), "s1")) == "light"
    # bob names alice's session with a hard prompt: his own session climbs, hers does not
    assert _tier(_ask(served, BOB, _user(HARD), "s1")) == "heavy"
    assert _tier(_ask(served, ALICE, _follow_up(EASY), "s1")) == "light"
    assert _tier(_ask(served, BOB, _follow_up(HARD), "s1")) == "heavy"  # his stays where it went
    answer = _ask(served, ALICE, _follow_up(EASY), "s1")
    assert answer.headers["x-route-session"] == "s1"  # each key sees the id it sent, never another's namespace


def test_the_same_conversation_from_another_key_derives_a_session_of_its_own(served):
    # bob replays the system prompt and first turn alice's task starts with, but escalates it
    assert _tier(_ask(served, ALICE, _user(EASY))) == "light"
    repeated_errors = [*_user(EASY),
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
                       {"role": "tool", "tool_call_id": "c1", "content": "Error: command failed"}]
    assert _tier(_ask(served, BOB, repeated_errors)) == "light"
    twice = [*repeated_errors, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: command failed again"}]
    assert _tier(_ask(served, BOB, twice)) == "heavy"  # two failed tool results in a row: bob's session moves up
    assert _tier(_ask(served, ALICE, _follow_up(EASY))) == "light"  # alice's, the same words, does not


@pytest.mark.parametrize(("header", "why"), [("x" * 300, "300 characters"), ("a\tb", "not printable")])
def test_a_bad_session_id_is_a_400_naming_the_header(served, header, why):
    answer = _ask(served, ALICE, _user(EASY), header)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "X-Session-Id" in error["message"] and error["param"] == "X-Session-Id" and why in error["message"]
