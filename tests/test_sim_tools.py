"""The simulator's scripted tool calls: answered as OpenAI tool calls, streamed in pieces as
providers do, reassembled by the real OpenAI backend, and carried through `route serve`'s chat
completions both ways."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from router.server import RouteServer
from tests.helpers import make_router

pytestmark = pytest.mark.integration

CALL = {"name": "lookup", "arguments": {"query": "route serve tool calls", "limit": 3}}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_stream_sends_the_arguments_in_several_pieces(sim):
    sim.script("m-any", [{"tool_calls": [CALL]}])
    body = {"model": "m-any", "stream": True, "messages": [{"role": "user", "content": "find"}]}
    events = [json.loads(line[5:]) for line in httpx.post(f"{sim.base_url}/chat/completions", json=body).text.split("\n")
              if line.startswith("data:") and "[DONE]" not in line]
    pieces = [d["tool_calls"][0] for e in events for c in e["choices"] for d in [c["delta"]] if d.get("tool_calls")]
    assert pieces[0]["id"] and pieces[0]["function"] == {"name": "lookup", "arguments": ""}
    assert len(pieces) >= 3  # the header, then the arguments in more than one piece
    assert json.loads("".join(p["function"]["arguments"] for p in pieces)) == CALL["arguments"]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_script_rejects_malformed_replies(sim):
    response = httpx.post(f"{sim.url}/sim/script", json={"model": "m", "replies": [{"tool_calls": [{"x": 1}]}]})
    assert response.status_code == 400 and "tool_calls" in response.text


@pytest.fixture
def client(sim):
    router = make_router(sim)
    with RouteServer(router) as srv:
        yield openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=20)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_round_trip_through_route_serve(client, sim, stream):
    sim.script("m-small", [{"content": "", "tool_calls": [CALL]}, "Found 3 results."])
    messages = [{"role": "user", "content": "look it up"}]
    if stream:
        calls: dict[int, dict] = {}
        finish = None
        for event in client.chat.completions.create(model="small", messages=messages, tools=TOOLS, stream=True):
            for piece in event.choices[0].delta.tool_calls or ():
                slot = calls.setdefault(piece.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = piece.id or slot["id"]
                slot["name"] += piece.function.name or ""
                slot["arguments"] += piece.function.arguments or ""
            finish = event.choices[0].finish_reason or finish
        call = calls[0]
    else:
        answer = client.chat.completions.create(model="small", messages=messages, tools=TOOLS)
        finish = answer.choices[0].finish_reason
        tool_call = answer.choices[0].message.tool_calls[0]
        call = {"id": tool_call.id, "name": tool_call.function.name, "arguments": tool_call.function.arguments}
    assert finish == "tool_calls" and call["name"] == "lookup"
    assert json.loads(call["arguments"]) == CALL["arguments"]
    followup = [*messages, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": "lookup", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "3 results"}]
    final = client.chat.completions.create(model="small", messages=followup, tools=TOOLS)
    assert final.choices[0].message.content == "Found 3 results."
    assert final.choices[0].finish_reason == "stop"
