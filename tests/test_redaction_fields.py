"""Every streamed field that can carry an upstream's text is redacted, not only text, thinking
and tool-call arguments: a tool call's id, Anthropic's `signature_delta`, and an error event
after the stream began, on every backend kind and in every protocol of `route serve` (and
through the Python API), as they already are in a whole answer.

The upstream is a real loopback server that echoes the key it was sent into those fields: as an
OpenAI-compatible server (the `openai` kind, and the `litellm` kind through real litellm's
`openai/` provider) it streams reasoning, then a tool call whose id holds the key; as Anthropic
(the `anthropic` kind) a thinking block sealed by a signature holding the key, then a tool_use
block whose id holds it; for the model `fails`, thinking and some text, then an error event
quoting the key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from backends.types import Chunk, ThinkingChunk, ToolCallChunk
from router import Router
from router.config_loader import load_config
from router.server import RouteServer
from tests.answering import serving

pytestmark = pytest.mark.integration

KEY = "sk-fields-7c6b5a49382716f5e4d3c2b1a0ZYXWVUTSRQ"  # no 12-character window repeats
VAR = "ROUTE_TEST_FIELDS_KEY"
WINDOW = 12  # any run of this many of the key's characters in an output is a leak
KINDS = ("openai", "anthropic", "litellm")
FAILING = ": the upstream waits here for the test's release\n\n"  # an SSE comment: nothing to a reader
GEMINI = "/v1beta/models/{model}:streamGenerateContent"  # the model is in Gemini's path
PATHS = ("/v1/chat/completions", "/v1/messages", "/v1/responses", GEMINI)


def _leaks(text: str) -> list[str]:
    return [KEY[i:i + WINDOW] for i in range(len(KEY) - WINDOW + 1) if KEY[i:i + WINDOW] in text]


def _sse(events: list[str]) -> httpx.Response:
    return httpx.Response(200, content="".join(events).encode(), headers={"content-type": "text/event-stream"})


def _openai(body: dict[str, Any], key: str) -> httpx.Response:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    call = {"index": 0, "id": "call_" + key, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    if not body.get("stream"):
        message = {"role": "assistant", "content": None, "tool_calls": [{k: v for k, v in call.items() if k != "index"}]}
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                                         "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    return _sse([chunk({"role": "assistant", "content": ""}), chunk({"reasoning_content": "let me look it up"}),
                 chunk({"tool_calls": [call]}), chunk({}, "tool_calls"), "data: [DONE]\n\n"])


def _event(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: " + json.dumps({"type": kind, **data}) + "\n\n"


def _anthropic(body: dict[str, Any], key: str) -> httpx.Response:
    start = _event("message_start", message={"id": "msg_1", "type": "message", "role": "assistant",
                                             "model": body["model"], "content": [],
                                             "usage": {"input_tokens": 3, "output_tokens": 1}})
    thinking = [_event("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
                _event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "let me look it up"})]
    if body["model"] == "fails":  # FAILING marks where the stream waits for the client to have the text
        return _sse([start, *thinking, _event("content_block_stop", index=0),
                     _event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
                     _event("content_block_delta", index=1, delta={"type": "text_delta", "text": "partial answer"}),
                     FAILING,
                     _event("error", error={"type": "overloaded_error", "message": f"overloaded; your key {key} waits"})])
    return _sse([start, *thinking,
                 _event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig-" + key}),
                 _event("content_block_stop", index=0),
                 _event("content_block_start", index=1, content_block={"type": "tool_use", "id": "toolu_" + key,
                                                                       "name": "lookup", "input": {}}),
                 _event("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": "{}"}),
                 _event("content_block_stop", index=1),
                 _event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),
                 _event("message_stop")])


def _echo(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if request.url.path.endswith("/messages"):
        return _anthropic(body, request.headers.get("x-api-key", ""))
    return _openai(body, request.headers.get("authorization", "").removeprefix("Bearer "))



class _Upstream(BaseHTTPRequestHandler):
    """`_echo` over HTTP, a body sent in parts: each FAILING line waits for the test's release (at
    most 10 s), so that text the client already has is not read in one go with the failure."""

    protocol_version = "HTTP/1.1"
    released = threading.Semaphore(0)

    def do_POST(self) -> None:
        content = self.rfile.read(int(self.headers.get("content-length") or 0))
        url = f"http://{self.headers.get('host')}{self.path}"
        response = _echo(httpx.Request("POST", url, headers=dict(self.headers.items()), content=content))
        parts = response.read().decode().split(FAILING)
        self.send_response(response.status_code)
        self.send_header("content-type", response.headers["content-type"])
        self.send_header("connection", "close")  # the body ends when the connection does
        self.end_headers()
        for number, part in enumerate(parts):
            if number:
                self.released.acquire(timeout=10)
            self.wfile.write(part.encode())
            self.wfile.flush()
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


def _config(url: str) -> dict[str, Any]:
    def backend(kind: str, model: str) -> dict[str, Any]:
        return {"kind": kind, "model": model, "base_url": url, "api_key": f"${{{VAR}}}", "max_retries": 0}

    return {"backends": {"openai": backend("openai", "m"), "anthropic": backend("anthropic", "claude-m"),
                         "litellm": backend("litellm", "openai/m"), "fails": backend("anthropic", "fails")},
            "routing": {"tiers": [{"name": "all", "backends": ["openai"]}]}}


@pytest.fixture
def router(monkeypatch) -> Iterator[Router]:
    monkeypatch.setenv(VAR, KEY)
    with serving(_Upstream) as url:
        router = Router(load_config(_config(url)), log=False)
        yield router
        router.close()


# -- the Python API -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_streamed_tool_call_id_and_signature_holding_the_key_arrive_redacted(router, kind):
    chunks: list[Chunk] = [chunk async for chunk in router.astream("hi", model=kind)]
    assert not _leaks(repr(chunks)), chunks
    [opening] = [c for c in chunks if isinstance(c, ToolCallChunk) and c.id is not None]
    assert opening.id == ("toolu_" if kind == "anthropic" else "call_") + "[REDACTED]"
    if kind == "anthropic":
        [sealed] = [c for c in chunks if isinstance(c, ThinkingChunk) and c.signature]
        assert sealed.signature == "sig-[REDACTED]"


# -- route serve, every protocol ------------------------------------------------------------------


def _url(path: str, model: str) -> str:
    return path.format(model=model) + "?alt=sse" if path == GEMINI else path


def _body(path: str, model: str) -> dict[str, Any]:
    if path == GEMINI:  # thoughts asked for, so the thinking comes back too
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    if path == "/v1/messages":
        return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    if path == "/v1/responses":
        return {"model": model, "input": "hi", "stream": True}
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
def served(router) -> Iterator[httpx.Client]:
    with RouteServer(router) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", PATHS)
def test_route_serve_streams_no_key_in_tool_call_ids_or_signatures(served, path, kind):
    response = served.post(_url(path, kind), json=_body(path, kind))
    assert response.status_code == 200, response.text
    assert not _leaks(response.text), response.text
    prefix = "toolu_" if kind == "anthropic" else "call_"
    assert f'"{prefix}[REDACTED]"' in response.text  # the call came, its id redacted
    if kind == "anthropic" and path == "/v1/messages":
        assert '"signature":"sig-[REDACTED]"' in response.text.replace(" ", "")


@pytest.mark.parametrize("path", PATHS)
def test_an_error_event_after_the_stream_began_carries_no_key(served, path):
    received = ""
    with served.stream("POST", _url(path, "fails"), json=_body(path, "fails")) as response:
        for data in response.iter_text():
            if "partial answer" not in received and "partial answer" in received + data:
                _Upstream.released.release()  # the client has the text: now the failure
            received += data
    assert response.status_code == 200 and "partial answer" in received, received
    assert "overloaded; your key [REDACTED] waits" in received  # the error event, in the protocol's shape
    assert not _leaks(received), received
