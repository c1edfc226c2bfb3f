"""The native `anthropic` backend kind: the Messages API over HTTP (aiohttp), against the
simulator's /v1/messages over real sockets (plain, streamed, tool calls in pieces, faults), and
the request it writes (headers, system, tool turns) to a loopback server answering as the test
says (tests/answering.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from backends.anthropic_http import AnthropicBackend
from backends.base import BackendSettings
from backends.errors import AuthError, BackendUnavailable, RateLimited
from backends.types import FinalChunk, Request, TextChunk
from tests.helpers import call

pytestmark = pytest.mark.integration

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def backend(base_url: str, **kw) -> AnthropicBackend:
    return AnthropicBackend(BackendSettings(name="frontier", model="claude-sonnet-4-5", base_url=base_url,
                                            max_retries=0, **kw))


def ask(text: str = "hello there", **kw) -> Request:
    return Request(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}], **kw)


async def test_complete_against_the_simulator(sim):
    sim.script("claude-sonnet-4-5", ["Hi, brief."])
    b = backend(sim.base_url)
    completion = await call(b, ask())
    await b.aclose()
    assert completion.text == "Hi, brief." and completion.finish_reason == "stop"
    assert completion.usage.output_tokens == 2 and completion.usage.input_tokens == 4
    assert completion.metadata.get("simulated") is True


async def test_stream_against_the_simulator(sim):
    sim.update_profile("claude-sonnet-4-5", ttft_s=0.0, tokens_per_s=None)
    b = backend(sim.base_url)
    chunks = [c async for c in b.stream(ask(max_tokens=5))]
    await b.aclose()
    texts = [c.text for c in chunks if isinstance(c, TextChunk)]
    final = chunks[-1]
    # five events, in as many chunks as reads brought them (what arrived together comes up merged)
    assert isinstance(final, FinalChunk) and 1 <= len(texts) <= 5 and all(texts)
    assert final.completion.text == "".join(texts) and final.completion.finish_reason == "length"
    assert final.completion.usage.output_tokens == 5 and final.completion.usage.input_tokens == 4


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_come_back_in_openai_format(sim, stream):
    sim.script("claude-sonnet-4-5", [{"content": "Let me look.",
                                      "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},
                                                     {"name": "get_weather", "arguments": {"city": "Rome"}}]}])
    b = backend(sim.base_url)
    request = ask(extra={"tools": TOOLS})
    if stream:
        completion = [c async for c in b.stream(request)][-1].completion
    else:
        completion = await b.complete(request)
    await b.aclose()
    assert completion.text == "Let me look." and completion.finish_reason == "tool_calls"
    cities = [json.loads(c["function"]["arguments"])["city"] for c in completion.tool_calls]
    assert cities == ["Paris", "Rome"] and all(c["id"] and c["function"]["name"] == "get_weather"
                                               for c in completion.tool_calls)


@pytest.mark.parametrize(("fault", "error"), [("500", BackendUnavailable), ("429", RateLimited)])
async def test_faults_are_our_errors(sim, fault, error):
    sim.set_faults("claude-sonnet-4-5", [fault])
    b = backend(sim.base_url)
    with pytest.raises(error):
        await b.complete(ask())
    await b.aclose()


async def test_the_request_it_writes(monkeypatch, answering):
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "sk-ant-test")
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
                                         "usage": {"input_tokens": 9, "output_tokens": 1}})

    base_url = answering(answer)
    b = AnthropicBackend(BackendSettings(name="f", model="claude-x", base_url=base_url,
                                         api_key_env="ANTHROPIC_TEST_KEY", params={"max_tokens": 64}))
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"c": 1}'}}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                {"role": "user", "content": "Thanks; and tomorrow?"}]
    completion = await b.complete(Request(messages=messages, temperature=1.5, stop=["END"],
                                          extra={"tools": TOOLS, "tool_choice": "required", "seed": 3}))
    await b.aclose()
    sent = seen[0]
    body = json.loads(sent.content)
    assert str(sent.url) == f"{base_url}/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test" and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert body["system"] == "Rules." and body["max_tokens"] == 64 and body["temperature"] == 1.0
    assert body["stop_sequences"] == ["END"] and "seed" not in body
    assert body["tools"] == [{"name": "get_weather", "description": "", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "any"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"c": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "text", "text": "sunny"}]},
                                     {"type": "text", "text": "Thanks; and tomorrow?"}]}]
    assert completion.text == "done" and completion.usage.input_tokens == 9


async def test_missing_key_is_an_auth_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_TEST_KEY", raising=False)
    b = backend("https://api.example/v1", api_key_env="ANTHROPIC_TEST_KEY")
    with pytest.raises(AuthError, match="ANTHROPIC_TEST_KEY"):
        await b.complete(ask())
