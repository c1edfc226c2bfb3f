"""The conformance suite's cases for what each entry path must do the same way (issue 45): the
spend cap on every way a stream can start, the thinking fallback whoever turned thinking on,
route's own `session` field in every protocol, and the web view's unknown paths. Each failed on
f0cb37a: a stream whose `.decision` was read first skipped the cap; an anthropic backend whose
`params:` enabled thinking was sent thinking on for an unsigned tool turn (a 400 every turn); a
chat body's `session` was a 500; `/ui/nope` a plain-text 500.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from backends.errors import UsageError
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.helpers import capped_config

pytestmark = pytest.mark.integration


# -- the spend cap, however a stream starts -----------------------------------------------------



def test_a_stream_whose_decision_was_read_first_is_refused_at_the_cap_too(paid, tmp_path):
    """Reading `.decision` decides without admitting; starting the stream still admits."""
    async def run() -> None:
        async with Router(load_config(capped_config(tmp_path, paid))) as router:
            await router.acomplete("hi")  # spends past the cap
            stream = router.astream("and a stream")
            assert stream.decision.chosen == "paid"  # known before it starts, as documented
            with pytest.raises(UsageError, match="spend cap reached"):
                async for _ in stream:
                    pass
            started = router.astream("started by hand")
            _ = started.decision
            with pytest.raises(UsageError, match="spend cap reached"):
                await started.start()

    asyncio.run(run())
    assert len(paid.bodies) == 1  # only the first request reached the upstream


def test_below_the_cap_a_stream_whose_decision_was_read_first_is_answered(paid, tmp_path):
    """The neighbour: admission does not refuse what the cap allows, and the decision read
    before the stream started is the one it runs."""
    config = capped_config(tmp_path, paid, cap_usd=100.0)

    async def run() -> None:
        async with Router(load_config(config)) as router:
            stream = router.astream("hi")
            decision = stream.decision
            text = "".join([getattr(chunk, "text", "") async for chunk in stream])
            assert text and await stream.start() is decision

    asyncio.run(run())
    assert len(paid.bodies) == 1


# -- the thinking fallback, whoever turned thinking on ------------------------------------------

STRONG = "claude-sim"
TOOL_LOOP = [
    {"role": "user", "content": "Run echo ok"},
    {"role": "assistant", "content": None,  # a turn an openai-kind model answered: no thinking, no signature
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command":"echo ok"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


@pytest.fixture
def thinking_server(sim):
    """An anthropic backend whose config turns thinking on, in front of the simulator enforcing
    Anthropic's rule (a tool loop with thinking on must send the signed thinking back: else 400)."""
    sim.update_profile(STRONG, signed_thinking=True)
    config = {"backends": {"strong": {"kind": "anthropic", "model": STRONG, "base_url": sim.base_url, "max_retries": 0,
                                      "passthrough": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}},
              "routing": {"tiers": [{"name": "only", "backends": ["strong"]}]}, "log": {"enabled": False}}
    with RouteServer(Router(load_config(config), source="server")) as server:
        yield server


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_tool_loop_arriving_unsigned_is_answered_when_the_config_turns_thinking_on(sim, thinking_server, stream):
    sim.script(STRONG, ["It printed ok."])
    body = {"model": "auto", "messages": TOOL_LOOP, "tools": TOOLS, "stream": stream}
    response = httpx.post(thinking_server.url + "/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert "It printed ok." in response.text
    assert sim.stats(STRONG)["completed"] == 1


def test_a_first_turn_keeps_the_thinking_the_config_turns_on(sim, thinking_server):
    """The neighbour: no tool loop, nothing to fall back from; the config's thinking is sent."""
    sim.script(STRONG, ["Four."])
    response = httpx.post(thinking_server.url + "/v1/chat/completions",
                          json={"model": "auto", "messages": [{"role": "user", "content": "2+2?"}]}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"].get("reasoning_content")  # it thought


# -- route's `session` field, in every protocol -------------------------------------------------


@pytest.fixture
def plain_server(paid):
    config = {"backends": {"fast": {"kind": "openai", "model": "m-fast", "base_url": paid.base_url}},
              "routing": {"tiers": [{"name": "only", "backends": ["fast"]}]}, "log": {"enabled": False}}
    with RouteServer(Router(load_config(config), source="server")) as server:
        yield server


BODIES = {
    "/v1/chat/completions": {"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages": {"model": "auto", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "auto", "input": "hi"},
    "/v1beta/models/auto:generateContent": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}


@pytest.mark.parametrize("path", BODIES)
def test_a_session_field_names_the_session_in_every_protocol(paid, plain_server, path):
    response = httpx.post(plain_server.url + path, json={**BODIES[path], "session": "task-42"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["x-route-session"] == "task-42"
    assert "session" not in paid.bodies[-1]  # route's own: never sent upstream


@pytest.mark.parametrize("path", BODIES)
def test_a_session_field_that_is_not_a_string_is_a_400_naming_it(plain_server, path):
    response = httpx.post(plain_server.url + path, json={**BODIES[path], "session": {"id": 1}}, timeout=30)
    assert response.status_code == 400, response.text
    assert "`session` must be a string" in response.text


# -- the web view's unknown paths ---------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "status"), [("GET", "/ui/nope", 404), ("GET", "/ui/static/nope.js", 404),
                                                        ("DELETE", "/ui/login", 405)])
def test_a_path_the_web_view_does_not_serve_is_a_json_error_not_a_500(plain_server, method, path, status):
    response = httpx.request(method, plain_server.url + path, timeout=30)
    assert response.status_code == status, response.text
    assert path in response.json()["error"]["message"]


def test_the_web_view_itself_is_still_served(plain_server):
    response = httpx.get(plain_server.url + "/ui", timeout=30)
    assert response.status_code == 200 and "<html" in response.text.lower()
