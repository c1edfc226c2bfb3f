"""A server that ignores `stream: true` and answers with the whole message as JSON (some
OpenAI-compatible servers and proxies do) gives a streamed call its text and usage, read as one
piece, for the openai and anthropic kinds alike. Read as SSE it was an empty answer that cost
nothing and said nothing (`route -q` printed a blank line and logged $0)."""

from __future__ import annotations

import json

import httpx
import pytest

from backends import build_backend
from backends.base import BackendSettings
from backends.types import FinalChunk, Request, TextChunk

pytestmark = pytest.mark.integration

PROMPT = Request(messages=[{"role": "user", "content": "hi"}], max_tokens=16)

OPENAI = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
          "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "whole answer"}}],
          "usage": {"prompt_tokens": 5, "completion_tokens": 7}}
ANTHROPIC = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
             "content": [{"type": "text", "text": "whole answer"}], "usage": {"input_tokens": 5, "output_tokens": 7}}


@pytest.mark.parametrize(("kind", "answer"), [("openai", OPENAI), ("anthropic", ANTHROPIC)])
async def test_a_json_answer_to_a_streamed_request_is_read_whole(answering, monkeypatch, kind, answer):
    sent: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=answer)  # application/json, though the request asked for a stream

    monkeypatch.setenv("WHOLE_KEY", "k" * 24)
    backend = build_backend(kind, BackendSettings(name="b", model="m", base_url=answering(handler),
                                                  api_key_env="WHOLE_KEY", max_retries=0))
    chunks = [chunk async for chunk in backend.stream(PROMPT)]
    await backend.aclose()
    assert sent[0]["stream"] is True
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "whole answer"
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and final.completion.text == "whole answer"
    assert (final.completion.usage.input_tokens, final.completion.usage.output_tokens) == (5, 7)
