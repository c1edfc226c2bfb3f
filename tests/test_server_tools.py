"""Tools pass through `route serve` to a backend that takes them, and tool calls come back, plain
and streamed. The upstream here is a tiny OpenAI-compatible server on loopback that records each
request body, so the test sees exactly what was forwarded (the simulator's scripted tool calls are
tested end to end in test_sim_tools.py), driven through the real openai SDK and OpenAI backend."""

from __future__ import annotations

import openai
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.helpers import TOOLS, tool_upstream


@pytest.fixture
def upstream():
    with tool_upstream() as app:
        yield app


@pytest.fixture
def client(upstream):
    config = {"backends": {"tooly": {"kind": "openai", "model": "tool-model", "base_url": upstream.base_url,
                                     "max_retries": 0}},
              "routing": {"tiers": [{"name": "only", "backends": ["tooly"]}]}}
    with RouteServer(Router(load_config(config), source="server")) as srv:
        yield openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)


def test_tools_reach_the_backend_and_tool_calls_come_back(client, upstream):
    answer = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "time?"}],
                                            tools=TOOLS, tool_choice="required")
    assert upstream.bodies[-1]["tools"] == TOOLS and upstream.bodies[-1]["tool_choice"] == "required"
    assert answer.choices[0].finish_reason == "tool_calls"
    call = answer.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "get_time", '{"tz": "UTC"}')


def test_streamed_tool_calls_arrive_as_they_form(client, upstream):
    """The upstream streams the call in pieces; they reach the client as pieces (before, the
    call arrived whole at the end), the first naming the call, and join to the whole call."""
    stream = client.chat.completions.create(model="tooly", messages=[{"role": "user", "content": "time?"}],
                                            tools=TOOLS, stream=True)
    chunks = [c for c in stream if c.choices]
    assert upstream.bodies[-1]["tools"] == TOOLS and upstream.bodies[-1]["stream"] is True
    pieces = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(pieces) > 1 and (pieces[0].id, pieces[0].function.name) == ("call_1", "get_time")
    assert {tc.index for tc in pieces} == {0}
    assert "".join(tc.function.arguments or "" for tc in pieces) == '{"tz": "UTC"}'
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
