"""What the client sends reaches the model; what the model says reaches the client (issue 29).

Each test goes through a real `route serve` (RouteServer, a free loopback port) to a loopback
upstream that records every body it receives and answers like the provider would: an
OpenAI-compatible server (`openai` kind) or Anthropic's Messages API (`anthropic` kind), with
prompt-cache usage and reasoning in their own shapes. Checked: cache markers and
`prompt_cache_key` arrive as the client sent them; reasoning settings, `metadata`, `user`,
`service_tier`, vendor extras and `max_completion_tokens` arrive as docs/reference/fields.md says; cached
usage and reasoning come back in each protocol's shape, plain and streamed; and the cost of a
cached exchange is the provider's price.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from typer.testing import CliRunner

from router import Router
from router.cli.app import app as cli
from router.config_loader import load_config
from router.server import RouteServer
from router.store import Store
from tests.answering import answering

pytestmark = pytest.mark.integration

SYSTEM_BLOCKS = [{"type": "text", "text": "You are a coding agent." * 20},
                 {"type": "text", "text": "Repository map: ...", "cache_control": {"type": "ephemeral"}}]
TOOLS_MARKED = [{"name": "read_file", "description": "Read a file",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "shell", "description": "Run a command", "input_schema": {"type": "object", "properties": {}},
                 "cache_control": {"type": "ephemeral"}}]
SIGNED = {"type": "thinking", "thinking": "I should read the file.", "signature": "sig-from-anthropic"}
TURNS_MARKED = [
    {"role": "user", "content": [{"type": "text", "text": "Fix the bug in main.py"}]},
    {"role": "assistant", "content": [SIGNED, {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                                "input": {"path": "main.py"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1/0)",
                                  "cache_control": {"type": "ephemeral"}},
                                 {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]},
]
CACHE_READ, CACHE_WRITE, UNCACHED, OUTPUT = 5000, 200, 12, 7
THOUGHT = "Let me think about this carefully."


class Upstream:
    """Records (path, body) of every request; answers as an OpenAI-compatible server or as
    Anthropic, by path, with cache usage and reasoning."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.seen.append((request.url.path, body))
        if request.url.path.endswith("/messages"):
            return self._anthropic(body)
        return self._openai(body)

    @property
    def last(self) -> dict[str, Any]:
        return self.seen[-1][1]

    @staticmethod
    def _openai(body: dict[str, Any]) -> httpx.Response:
        usage = {"prompt_tokens": UNCACHED + CACHE_READ, "completion_tokens": OUTPUT,
                 "total_tokens": UNCACHED + CACHE_READ + OUTPUT, "prompt_tokens_details": {"cached_tokens": CACHE_READ},
                 "completion_tokens_details": {"reasoning_tokens": 3}}
        if not body.get("stream"):
            message = {"role": "assistant", "content": "Done.", "reasoning_content": THOUGHT}
            return httpx.Response(200, json={"id": "c", "object": "chat.completion", "model": body["model"],
                                             "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                             "usage": usage})

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "model": body["model"],
                                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                                          if delta is not None else [], **extra}) + "\n\n"

        events = [chunk({"role": "assistant", "content": ""}), chunk({"reasoning_content": "Let me think "}),
                  chunk({"reasoning_content": "about this carefully."}), chunk({"content": "Do"}),
                  chunk({"content": "ne."}), chunk({}, "stop"), chunk(None, usage=usage), "data: [DONE]\n\n"]
        return httpx.Response(200, content="".join(events).encode(), headers={"content-type": "text/event-stream"})

    @staticmethod
    def _anthropic(body: dict[str, Any]) -> httpx.Response:
        usage = {"input_tokens": UNCACHED, "cache_read_input_tokens": CACHE_READ,
                 "cache_creation_input_tokens": CACHE_WRITE, "output_tokens": OUTPUT}
        if not body.get("stream"):
            content = [{"type": "thinking", "thinking": THOUGHT, "signature": "sig-new"},
                       {"type": "text", "text": "Done."}]
            return httpx.Response(200, json={"id": "msg_1", "type": "message", "role": "assistant",
                                             "model": body["model"], "content": content, "stop_reason": "end_turn",
                                             "usage": usage})

        def event(kind: str, **data: Any) -> str:
            return f"event: {kind}\ndata: " + json.dumps({"type": kind, **data}) + "\n\n"

        start = {**usage, "output_tokens": 1}
        events = [
            event("message_start", message={"id": "msg_1", "type": "message", "role": "assistant",
                                            "model": body["model"], "content": [], "usage": start}),
            event("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
            event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Let me think "}),
            event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "about this carefully."}),
            event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig-new"}),
            event("content_block_stop", index=0),
            event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
            event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Done."}),
            event("content_block_stop", index=1),
            event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": OUTPUT}),
            event("message_stop"),
        ]
        return httpx.Response(200, content="".join(events).encode(), headers={"content-type": "text/event-stream"})


PRICES = {"input": 3.0, "output": 15.0, "cache_read": 0.30, "cache_write": 3.75}


def _config(base_url: str) -> dict[str, Any]:
    return {
        "backends": {
            "oa": {"kind": "openai", "model": "vendor/model-1", "base_url": base_url, "max_retries": 0, "price": PRICES},
            "an": {"kind": "anthropic", "model": "claude-test", "base_url": base_url, "max_retries": 0,
                   "api_key": "${ANTHROPIC_FIDELITY_KEY}", "price": PRICES},
        },
        "routing": {"tiers": [{"name": "only", "backends": ["oa"]}]},
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    recorder = Upstream()
    with answering(recorder) as base_url:
        yield recorder, base_url


@pytest.fixture
def server(upstream, monkeypatch, tmp_path) -> Iterator[RouteServer]:
    monkeypatch.setenv("ANTHROPIC_FIDELITY_KEY", "sk-ant-fidelity-test-key")
    recorder, base_url = upstream
    recorder.seen.clear()
    with RouteServer(Router(load_config(_config(base_url)), source="server")) as srv:
        yield srv


def _anthropic_client(server: RouteServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def _openai_client(server: RouteServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


# -- what the client sends reaches the model ----------------------------------------------------


def test_messages_cache_markers_thinking_and_options_reach_an_anthropic_upstream(server, upstream):
    recorder, _ = upstream
    _anthropic_client(server).messages.create(
        model="an", max_tokens=4096, system=SYSTEM_BLOCKS, tools=TOOLS_MARKED, messages=TURNS_MARKED,
        thinking={"type": "enabled", "budget_tokens": 2048}, metadata={"user_id": "user-42"}, extra_body={"top_k": 5})
    sent = recorder.last
    assert sent["system"] == SYSTEM_BLOCKS
    assert sent["tools"] == [{**tool, "description": tool["description"]} for tool in TOOLS_MARKED]
    assert sent["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "Fix the bug in main.py"}]}
    assert sent["messages"][1]["content"][0] == SIGNED  # the signed thinking goes back to who signed it
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "print(1/0)"}],
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["metadata"] == {"user_id": "user-42"}
    assert "top_k" not in sent and "temperature" not in sent  # Anthropic refuses sampling changes while thinking


def test_chat_fields_reach_an_openai_compatible_upstream_as_written(server, upstream):
    recorder, _ = upstream
    _openai_client(server).chat.completions.create(
        model="oa", messages=[{"role": "user", "content": "hi"}], max_completion_tokens=64, reasoning_effort="high",
        prompt_cache_key="session-7", user="user-42", metadata={"task": "fix"}, service_tier="flex", seed=3,
        extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": True}})
    sent = recorder.last
    expected = {"max_completion_tokens": 64, "reasoning_effort": "high", "prompt_cache_key": "session-7",
                "user": "user-42", "metadata": {"task": "fix"}, "service_tier": "flex", "seed": 3, "top_k": 20,
                "chat_template_kwargs": {"enable_thinking": True}}
    assert {k: sent.get(k) for k in expected} == expected
    assert "max_tokens" not in sent  # OpenAI's reasoning models refuse it beside max_completion_tokens


def test_chat_cache_markers_and_reasoning_effort_reach_an_anthropic_upstream(server, upstream):
    recorder, _ = upstream
    _openai_client(server).chat.completions.create(
        model="an", max_tokens=4096, reasoning_effort="medium", user="user-42",
        messages=[{"role": "system", "content": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]},
                  {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}},
                "cache_control": {"type": "ephemeral"}}])
    sent = recorder.last
    assert sent["system"] == [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi",
                                                              "cache_control": {"type": "ephemeral"}}]}]
    assert sent["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["metadata"] == {"user_id": "user-42"}


def test_responses_fields_reach_an_openai_compatible_upstream(server, upstream):
    recorder, _ = upstream
    _openai_client(server).responses.create(
        model="oa", input="hi", instructions="be brief", prompt_cache_key="codex-session-1",
        reasoning={"effort": "low"}, metadata={"task": "fix"}, max_output_tokens=64)
    sent = recorder.last
    assert sent["prompt_cache_key"] == "codex-session-1" and sent["reasoning_effort"] == "low"
    # max_output_tokens arrives as chat's max_completion_tokens, never max_tokens (OpenAI's reasoning models refuse it)
    assert sent["metadata"] == {"task": "fix"} and sent["max_completion_tokens"] == 64 and "max_tokens" not in sent
    assert sent["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_openai_itself_gets_only_its_own_fields(upstream, monkeypatch):
    """OpenAI's API refuses fields it does not know: vendor extras and cache markers stop here."""
    from backends.base import BackendSettings
    from backends.openai_http import OpenAIBackend
    from backends.types import Request

    backend = OpenAIBackend(BackendSettings(name="gpt", model="gpt-5", base_url="https://api.openai.com/v1"))
    payload = backend._payload(Request(
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                  {"role": "assistant", "content": "x", "thinking_blocks": [SIGNED]}],
        extra={"prompt_cache_key": "k", "top_k": 5, "thinking": {"type": "enabled"}}), stream=False)
    assert payload["prompt_cache_key"] == "k" and "top_k" not in payload and "thinking" not in payload
    assert payload["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                   {"role": "assistant", "content": "x"}]


# -- what the model says reaches the client -----------------------------------------------------


@pytest.mark.parametrize("model", ["oa", "an"])
def test_chat_returns_cached_usage_and_reasoning_plain_and_streamed(server, model):
    client = _openai_client(server)
    ask = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}
    answer = client.chat.completions.create(**ask)
    writes = CACHE_WRITE if model == "an" else 0
    assert answer.usage.prompt_tokens == UNCACHED + CACHE_READ + writes
    assert answer.usage.prompt_tokens_details.cached_tokens == CACHE_READ
    assert answer.choices[0].message.model_extra["reasoning_content"] == THOUGHT
    assert answer.choices[0].message.content == "Done."
    chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    thought = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert thought == THOUGHT and text == "Done."
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == CACHE_READ


def test_reasoning_tokens_are_the_upstreams_count_plain_and_streamed(server):
    """The upstream says 3; an estimate from the share of characters said 4 (issue 37)."""
    client = _openai_client(server)
    ask = {"model": "oa", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}
    assert client.chat.completions.create(**ask).usage.completion_tokens_details.reasoning_tokens == 3
    chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 3
    answer = client.responses.create(model="oa", input="hi", max_output_tokens=4096)
    assert answer.usage.output_tokens_details.reasoning_tokens == 3


@pytest.mark.parametrize("model", ["oa", "an"])
def test_messages_returns_cache_usage_and_thinking_plain_and_streamed(server, model):
    client = _anthropic_client(server)
    ask = {"model": model, "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
    answer = client.messages.create(**ask)
    writes = CACHE_WRITE if model == "an" else 0
    assert (answer.usage.input_tokens, answer.usage.cache_read_input_tokens,
            answer.usage.cache_creation_input_tokens) == (UNCACHED, CACHE_READ, writes)
    thinking, text = answer.content[0], answer.content[1]
    assert thinking.type == "thinking" and thinking.thinking == THOUGHT and text.text == "Done."
    assert thinking.signature == ("sig-new" if model == "an" else "")  # only Anthropic's own thinking is signed
    with client.messages.stream(**ask) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == THOUGHT and final.content[1].text == "Done."
    assert final.content[0].signature == ("sig-new" if model == "an" else "")
    assert final.usage.cache_read_input_tokens == CACHE_READ


@pytest.mark.parametrize("model", ["oa", "an"])
def test_responses_returns_cached_usage_and_a_reasoning_item_plain_and_streamed(server, model):
    client = _openai_client(server)
    answer = client.responses.create(model=model, input="hi", max_output_tokens=4096)
    assert answer.usage.input_tokens_details.cached_tokens == CACHE_READ
    reasoning, message = answer.output[0], answer.output[1]
    assert reasoning.type == "reasoning" and reasoning.content[0].text == THOUGHT
    assert message.type == "message" and answer.output_text == "Done."
    events = list(client.responses.create(model=model, input="hi", max_output_tokens=4096, stream=True))
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert thought == THOUGHT and text == "Done."
    completed = events[-1].response
    assert [item.type for item in completed.output] == ["reasoning", "message"]
    assert completed.usage.input_tokens_details.cached_tokens == CACHE_READ


def test_the_cost_of_a_cached_exchange_is_the_providers_price(upstream, monkeypatch, tmp_path):
    """`route stats` after cached exchanges: reads at the cache-read price, writes at the
    cache-write price, the rest at the input price (before: everything at the input price, or,
    for Anthropic, only the uncached tokens)."""
    monkeypatch.setenv("ANTHROPIC_FIDELITY_KEY", "sk-ant-fidelity-test-key")
    _, base_url = upstream
    config_file = tmp_path / "route.yaml"
    config_file.write_text(json.dumps(_config(base_url)))
    with Router(load_config(str(config_file)), source="api") as router:
        router.complete("hi", model="oa")
        router.complete("hi", model="an")
        router.request_log.flush()
        rows = {row["backend"]: row for row in Store(router.request_log.path).recent(2)}
    assert (rows["oa"]["cache_read_tokens"], rows["oa"]["cache_write_tokens"]) == (CACHE_READ, 0)
    assert (rows["an"]["cache_read_tokens"], rows["an"]["cache_write_tokens"]) == (CACHE_READ, CACHE_WRITE)
    result = CliRunner().invoke(cli, ["stats", "--json", "-c", str(config_file)])
    assert result.exit_code == 0, result.output
    total = json.loads(result.stdout)["total_cost_usd"]
    per_mtok = PRICES
    openai_side = UNCACHED * per_mtok["input"] + CACHE_READ * per_mtok["cache_read"] + OUTPUT * per_mtok["output"]
    anthropic_side = openai_side + CACHE_WRITE * per_mtok["cache_write"]
    assert total == pytest.approx((openai_side + anthropic_side) / 1e6, abs=1e-5)  # a thousandth of a cent
