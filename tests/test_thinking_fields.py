"""What the `anthropic` kind sends of a thinking request, and the Responses API's carrier of
signed thinking, in process (issue 37): room for the answer when thinking is on, the thinking
budget under a client's maximum, system turns kept where the client put them when the backend's
own beta allows it, the signed blocks a chat client dropped given back only to the holder of
their text, and `encrypted_content` that only ever yields well-formed thinking blocks."""

from __future__ import annotations

import base64
import zlib

import orjson
import pytest

from backends.anthropic_http import AnthropicBackend
from backends.base import BackendSettings
from backends.types import Completion, Request, Usage
from router.server.protocols.reasoning import blocks_from, encrypted_content

pytestmark = pytest.mark.unit

SIGNED = {"type": "thinking", "thinking": "Run the command first.", "signature": "sig-1"}
REDACTED = {"type": "redacted_thinking", "data": "opaque=="}
CALL = {"id": "toolu_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
TOOL_LOOP = [{"role": "user", "content": "list the files"},
             {"role": "assistant", "content": "", "tool_calls": [CALL]},
             {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py"}]


def _backend(**settings) -> AnthropicBackend:
    return AnthropicBackend(BackendSettings(name="claude", model="claude-x", base_url="http://127.0.0.1:9/v1",
                                            **settings))


@pytest.mark.parametrize(("max_tokens", "effort", "sent_max", "budget"), [
    (None, "high", 4096 + 4096, 4096),  # no maximum asked: the answer keeps its default room, thinking on top
    (None, "medium", 4096 + 2048, 2048),
    (4096, "high", 4096, 2048),  # the client's maximum: thinking takes at most half
    (32000, "medium", 32000, 2048),
    (1500, "low", 1500, None),  # half of it is under Anthropic's smallest budget: no thinking
])
def test_thinking_leaves_room_for_the_answer(max_tokens, effort, sent_max, budget):
    payload = _backend()._payload(Request(messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens,
                                          extra={"reasoning_effort": effort}), stream=False)
    assert payload["max_tokens"] == sent_max
    assert payload.get("thinking") == ({"type": "enabled", "budget_tokens": budget} if budget else None)


def test_a_system_turn_stays_in_place_under_the_backends_own_beta():
    turns = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"},
             {"role": "system", "content": "a reminder"}, {"role": "user", "content": "go on"}]
    configured = _backend(headers={"anthropic-beta": "mid-conversation-system-2026-04-07"})
    kept = configured._payload(Request(messages=turns), stream=False)
    assert kept["system"] == "rules"
    assert [t["role"] for t in kept["messages"]] == ["user", "system", "user"]
    moved = _backend()._payload(Request(messages=turns), stream=False)  # Anthropic takes it nowhere else
    assert moved["system"] == "rules\n\na reminder" and [t["role"] for t in moved["messages"]] == ["user"]


def _answered_with_thinking(backend: AnthropicBackend) -> None:
    """The backend's answer with the tool call: signed thinking first (what it remembers)."""
    body = {"content": [SIGNED, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 9}}
    backend._answer(orjson.dumps(body), simulated=False)


def _sent_back(backend: AnthropicBackend, reasoning: str | None) -> dict:
    turns = [dict(t) for t in TOOL_LOOP]
    if reasoning is not None:
        turns[1]["reasoning_content"] = reasoning
    return backend._payload(Request(messages=turns, extra={"reasoning_effort": "medium"}), stream=False)


def test_the_signed_blocks_come_back_to_whoever_sends_their_text():
    backend = _backend()
    _answered_with_thinking(backend)
    payload = _sent_back(backend, SIGNED["thinking"])
    assert payload["messages"][1]["content"][0] == SIGNED and payload["thinking"]["type"] == "enabled"


@pytest.mark.parametrize("reasoning", [None, "", "I had other thoughts."])
def test_without_the_text_the_call_is_answered_without_thinking(reasoning):
    """No proof of holding the thinking: nothing of it is sent, and thinking is off for the call
    (Anthropic's rule would refuse it on)."""
    backend = _backend()
    _answered_with_thinking(backend)
    payload = _sent_back(backend, reasoning)
    assert "thinking" not in payload
    assert all(b["type"] not in ("thinking", "redacted_thinking") for t in payload["messages"] for b in t["content"])


def test_adaptive_thinking_is_sent_as_the_client_sent_it():
    """Under `adaptive` the model may not have thought before its calls: nothing is missing."""
    turns = [*TOOL_LOOP[:1], {**TOOL_LOOP[1], "thinking_blocks": []}, TOOL_LOOP[2]]
    payload = _backend()._payload(Request(messages=turns, max_tokens=8000, extra={"thinking": {"type": "adaptive"}}),
                                  stream=False)
    assert payload["thinking"] == {"type": "adaptive"}


def test_encrypted_content_round_trips_signed_and_redacted_blocks():
    assert blocks_from(encrypted_content([REDACTED, SIGNED])) == [REDACTED, SIGNED]


def _ours(payload: bytes) -> str:
    return "route-thinking-1." + base64.urlsafe_b64encode(zlib.compress(payload)).decode()


@pytest.mark.parametrize("value", [
    None, 42, "gAAAAABoFernetFromOpenAI", "route-thinking-1.not base64!", _ours(b"not json"), _ours(b'{"a": 1}'),
    _ours(b"[" + b" " * (5 << 20) + b"]"),  # inflates past the bound: refused, not read
])
def test_anything_else_in_encrypted_content_yields_nothing(value):
    assert blocks_from(value) == []


def test_only_well_formed_thinking_blocks_come_out_of_encrypted_content():
    value = _ours(orjson.dumps([{**SIGNED, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "x"},
                                {"type": "thinking", "thinking": "unsigned", "signature": ""}, "junk", REDACTED]))
    assert blocks_from(value) == [SIGNED, REDACTED]


def test_reported_reasoning_tokens_are_the_upstreams():
    from backends.thinking import with_thinking

    completion = Completion(text="Done.", backend="b", model="m", usage=Usage(output_tokens=7, thinking_tokens=3))
    assert with_thinking(completion, "Let me think about this carefully.").usage.thinking_tokens == 3
    unreported = Completion(text="Done.", backend="b", model="m", usage=Usage(output_tokens=7))
    assert 0 < with_thinking(unreported, "Let me think about this carefully.").usage.thinking_tokens <= 7
