"""Tools pass through `route serve` to a backend that takes them, and tool calls come back, plain
and streamed. The upstream here is a tiny OpenAI-compatible server on loopback that records each
request body, so the test sees exactly what was forwarded (the simulator's scripted tool calls are
tested end to end in test_sim_tools.py), driven through the real openai SDK and OpenAI backend."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.helpers import TOOLS, make_router, tool_upstream

pytestmark = pytest.mark.integration


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


# -- tool calls stream as they form, on every protocol, read by the real SDKs -----------------

SCRIPTED_CALL = {"content": "", "tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC", "format": "iso-8601"}}]}


@pytest.fixture
def sim_server(sim):
    sim.update_profile("m-small", ttft_s=0.0, tokens_per_s=None)
    sim.script("m-small", [SCRIPTED_CALL])
    with RouteServer(make_router(sim)) as srv:
        yield srv


def test_messages_stream_tool_input_in_pieces_before_the_end(sim_server):
    client = anthropic.Anthropic(base_url=sim_server.url, api_key="-", max_retries=0)
    tool = {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
    kinds, pieces = [], []
    with client.messages.stream(model="small", max_tokens=64, tools=[tool],
                                messages=[{"role": "user", "content": "time?"}]) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "input_json":
                pieces.append(event.partial_json)
        final = stream.get_final_message()
    assert len(pieces) > 1 and kinds.index("input_json") < kinds.index("message_stop")
    assert final.content[-1].input == {"tz": "UTC", "format": "iso-8601"} and final.stop_reason == "tool_use"


def test_responses_stream_function_arguments_in_pieces_before_the_end(sim_server):
    client = openai.OpenAI(base_url=sim_server.base_url, api_key="-", max_retries=0)
    tool = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
    events = list(client.responses.create(model="small", input="time?", tools=[tool], stream=True))
    kinds = [e.type for e in events]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and kinds.index("response.function_call_arguments.delta") < kinds.index("response.completed")
    call = events[-1].response.output[-1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"tz": "UTC", "format": "iso-8601"}
    assert "".join(deltas) == call.arguments
