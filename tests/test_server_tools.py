"""Tools pass through `route serve` to a backend that takes them, and tool calls come back, plain
and streamed. The upstream here is a tiny OpenAI-compatible server on loopback that records each
request body, so the test sees exactly what was forwarded (the simulator's scripted tool calls are
tested end to end in test_sim_tools.py), driven through the real openai SDK and OpenAI backend."""

from __future__ import annotations

import json
import socket
import threading
import time

import openai
import pytest
import uvicorn

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer

TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}}


class ToolUpstream:
    """Records each request body; answers with one tool call."""

    def __init__(self):
        self.bodies: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw)
        self.bodies.append(body)
        if body.get("stream"):
            head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
            pieces = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": ""}},
                      {"index": 0, "function": {"arguments": '{"tz": '}},
                      {"index": 0, "function": {"arguments": '"UTC"}'}}]
            events = [{**head, "choices": [{"index": 0, "delta": {"tool_calls": [p]}, "finish_reason": None}]}
                      for p in pieces]
            events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
            out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            content_type = b"text/event-stream"
        else:
            out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "tool_calls",
                                           "message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}],
                              "usage": {"prompt_tokens": 5, "completion_tokens": 7}}).encode()
            content_type = b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
        await send({"type": "http.response.body", "body": out})


@pytest.fixture
def upstream():
    app = ToolUpstream()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.005)
    app.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    yield app
    server.should_exit = True
    thread.join(timeout=5)


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


def test_streamed_tool_calls_arrive_whole(client, upstream):
    stream = client.chat.completions.create(model="tooly", messages=[{"role": "user", "content": "time?"}],
                                            tools=TOOLS, stream=True)
    chunks = [c for c in stream if c.choices]
    assert upstream.bodies[-1]["tools"] == TOOLS and upstream.bodies[-1]["stream"] is True
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(tc.index, tc.id, tc.function.name, tc.function.arguments) for tc in calls] == [
        (0, "call_1", "get_time", '{"tz": "UTC"}')]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
