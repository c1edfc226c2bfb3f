"""Signed thinking round trips (issue 37): Codex (Responses), OpenCode (chat) and Gemini CLI tool loops, replayed
turn by turn from their recorded bodies with the answers route gives back, through a real
`route serve` to the simulator's Anthropic endpoint as the strong backend, under the simulator's
`signed_thinking` profile: Anthropic's rule that a tool loop with thinking on sends the signed
thinking block back unchanged (else a 400). Each loop finishes on the strong backend, thinking on
every turn, with no downgrade. Also: the rule as the simulator enforces it, redacted thinking,
each protocol's shape of the signed blocks, and a client that drops them.

These pass without the `errors` helper's work (a refused shape as the request's fault): when the
signatures come back there is no 400 at all.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backends.simulator.thinking import REDACTED_TRIGGER
from router import Router
from router.config_loader import load_config
from router.server import RouteServer

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).parent / "data" / "clients"
STRONG, MEDIUM = "claude-sim", "m-medium"  # the simulated models behind the two tiers
EXEC = {"name": "exec_command", "arguments": {"cmd": "echo corpus-ok"}}
BASH = {"name": "bash", "arguments": {"command": "echo corpus-ok"}}
FINAL = "It printed corpus-ok."


def _recorded(name: str) -> dict[str, Any]:
    return json.loads((CLIENTS / f"{name}.json").read_text())


@pytest.fixture
def server(sim) -> Iterator[RouteServer]:
    """`route serve` with a medium tier (openai kind) under a heavy one (anthropic kind, the
    simulator enforcing Anthropic's signed-thinking rule); every prompt scores heavy, so a
    failure of the strong backend would show as a downgrade to medium."""
    sim.update_profile(STRONG, signed_thinking=True)
    config = {
        "backends": {
            "medium": {"kind": "openai", "model": MEDIUM, "base_url": sim.base_url, "max_retries": 0},
            "strong": {"kind": "anthropic", "model": STRONG, "base_url": sim.base_url, "max_retries": 0},
        },
        "routing": {"scorer": {"kind": "length", "threshold_chars": 1},
                    "tiers": [{"name": "medium", "below": 0.5, "backends": ["medium"]},
                              {"name": "heavy", "backends": ["strong"]}]},
        "aliases": {"gpt-5": "auto", "corpus-model": "auto"},
    }
    with RouteServer(Router(load_config(config), source="server")) as srv:
        yield srv


def _post(server: RouteServer, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """The response, and a stream's events (data lines as JSON) when the body asked to stream."""
    with httpx.Client(timeout=30) as client:
        response = client.post(server.url + path, json=body)
    if not body.get("stream"):
        return response, []
    events = [json.loads(line[5:]) for line in response.text.splitlines()
              if line.startswith("data:") and line[5:].strip() != "[DONE]"]
    return response, events


def _on_strong(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["x-route-backend"] == "strong" and "x-route-downgraded" not in response.headers


# -- Codex, Responses ---------------------------------------------------------------------------


def _codex_turn(server: RouteServer, body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The items Codex keeps of an answer (each `response.output_item.done`), and the response."""
    response, events = _post(server, "/v1/responses", body)
    _on_strong(response)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    completed = next(e["response"] for e in events if e["type"] == "response.completed")
    assert [item["type"] for item in completed["output"]] == [item["type"] for item in done]
    return done, completed


def _as_codex_sends(item: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """An answer's item as Codex sends it back: the keys its recorded body has (a reasoning
    item's `content` null)."""
    kept = {key: item.get(key) for key in recorded}
    return {**kept, "content": None} if item["type"] == "reasoning" else kept


def test_a_codex_tool_loop_keeps_thinking_on_the_strong_backend(sim, server):
    recorded = _recorded("codex-responses-tool-round-trip")["body"]
    first_reasoning = next(i for i, item in enumerate(recorded["input"]) if item["type"] == "reasoning")
    sim.script(STRONG, [{"tool_calls": [EXEC]}, FINAL])
    opening = {**copy.deepcopy(recorded), "input": recorded["input"][:first_reasoning]}

    asked, _ = _codex_turn(server, opening)
    reasoning, call = asked
    sent_back = [_as_codex_sends(item, recorded["input"][first_reasoning + n]) for n, item in enumerate(asked)]
    output = {**recorded["input"][-1], "call_id": call["call_id"]}
    items, completed = _codex_turn(server, {**opening, "input": [*opening["input"], *sent_back, output]})
    assert [item["type"] for item in items] == ["reasoning", "message"]  # it thought again: thinking stayed on
    assert completed["output"][1]["content"][0]["text"] == FINAL
    assert sim.stats(STRONG)["completed"] == 2 and sim.stats(MEDIUM)["requests"] == 0
    # what made it work: the signed thinking went out in encrypted_content, and a summary Codex shows
    assert reasoning["type"] == "reasoning" and reasoning.get("encrypted_content")
    assert reasoning["summary"][0]["type"] == "summary_text" and reasoning["summary"][0]["text"]
    assert call["type"] == "function_call" and call["name"] == "exec_command"


def test_a_responses_client_that_drops_the_encrypted_content_is_answered_without_thinking(sim, server):
    """The blocks cannot be found: thinking is off for that call (Anthropic takes that), not a 400."""
    sim.script(STRONG, [{"tool_calls": [EXEC]}, FINAL])
    ask = {"model": "auto", "input": "Run echo corpus-ok", "reasoning": {"effort": "medium", "summary": "auto"},
           "include": ["reasoning.encrypted_content"], "tools": [{"type": "function", "name": "exec_command",
                                                                  "parameters": {"type": "object"}}]}
    first = _post(server, "/v1/responses", ask)[0]
    _on_strong(first)
    reasoning, call = first.json()["output"]
    del reasoning["encrypted_content"]
    again = _post(server, "/v1/responses", {**ask, "input": [
        {"role": "user", "content": "Run echo corpus-ok"}, reasoning, call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "corpus-ok"}]})[0]
    _on_strong(again)
    assert [item["type"] for item in again.json()["output"]] == ["message"]  # answered, without thinking


# -- OpenCode, chat completions -----------------------------------------------------------------


def _chat_answer(server: RouteServer, body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message, as a client assembles it from the stream (or reads it whole)."""
    response, events = _post(server, "/v1/chat/completions", body)
    _on_strong(response)
    if not body.get("stream"):
        return response.json()["choices"][0]["message"]
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": "", "tool_calls": [],
                               "thinking_blocks": []}
    for event in events:
        for choice in event.get("choices") or ():
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            message["reasoning_content"] += delta.get("reasoning_content") or ""
            message["thinking_blocks"] += delta.get("thinking_blocks") or []
            for piece in delta.get("tool_calls") or ():
                if piece.get("id"):
                    message["tool_calls"].append({"id": piece["id"], "type": "function",
                                                  "function": {"name": piece["function"]["name"], "arguments": ""}})
                message["tool_calls"][piece["index"]]["function"]["arguments"] += piece["function"]["arguments"]
    return message


@pytest.mark.parametrize("stream", [True, False])
def test_an_opencode_tool_loop_keeps_thinking_on_the_strong_backend(sim, server, stream):
    """OpenCode sends back `reasoning_content` and nothing else: the backend finds the signed
    blocks it gave out for those tool calls and that text."""
    recorded = _recorded("opencode-chat-reasoning-tool-round-trip")["body"]
    sim.script(STRONG, [{"tool_calls": [BASH]}, FINAL])
    opening = {**copy.deepcopy(recorded), "messages": recorded["messages"][:2], "stream": stream}
    if not stream:
        opening.pop("stream_options")  # OpenCode asks for stream options only when it streams

    answer = _chat_answer(server, opening)
    assert answer["reasoning_content"] and answer["tool_calls"][0]["function"]["name"] == "bash"
    assistant, result = recorded["messages"][2:]
    sent_back = {**assistant, "reasoning_content": answer["reasoning_content"], "tool_calls": answer["tool_calls"]}
    assert "thinking_blocks" not in sent_back  # as OpenCode sends it
    final = _chat_answer(server, {**opening, "messages": [
        *opening["messages"], sent_back, {**result, "tool_call_id": answer["tool_calls"][0]["id"]}]})
    assert final["content"] == FINAL and final["reasoning_content"]  # it thought again: thinking stayed on
    assert sim.stats(STRONG)["completed"] == 2 and sim.stats(MEDIUM)["requests"] == 0
    # clients that keep them (LiteLLM's convention) get the signed blocks themselves
    signed = answer.get("thinking_blocks") or []
    assert [b["type"] for b in signed] == ["thinking"] and signed[0]["thinking"] == answer["reasoning_content"]


def test_another_thinking_text_does_not_bring_back_the_signed_blocks(sim, server):
    """A tool call id is not proof of holding its thinking: the text must match, else the call
    is answered without thinking."""
    sim.script(STRONG, [{"tool_calls": [BASH]}, FINAL])
    ask = {"model": "auto", "reasoning_effort": "medium", "tools": _recorded(
        "opencode-chat-reasoning-tool-round-trip")["body"]["tools"], "messages": [{"role": "user", "content": "run it"}]}
    answer = _chat_answer(server, ask)
    final = _chat_answer(server, {**ask, "messages": [
        *ask["messages"], {"role": "assistant", "content": "", "reasoning_content": "something I never thought",
                           "tool_calls": answer["tool_calls"]},
        {"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": "corpus-ok"}]})
    assert final["content"] == FINAL and not final.get("reasoning_content")


# -- Gemini CLI, Gemini's protocol --------------------------------------------------------------

SHELL = {"name": "run_shell_command", "arguments": {"command": "echo corpus-ok"}}


def _gemini_parts(server: RouteServer, body: dict[str, Any], stream: bool) -> list[dict[str, Any]]:
    """Every part of the model's answer, streamed (as Gemini CLI asks) or whole."""
    method = "streamGenerateContent" if stream else "generateContent"
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server.url}/v1beta/models/auto:{method}", params={"alt": "sse"} if stream else None,
                               json=body)
    _on_strong(response)
    answers = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")] \
        if stream else [response.json()]
    return [part for answer in answers for part in answer["candidates"][0]["content"]["parts"]]


def _gemini_loop(server: RouteServer, stream: bool, keep_signature: bool) -> list[dict[str, Any]]:
    """Gemini CLI's recorded first request, then its tool round trip with the model turn as the
    CLI keeps it (the function call with its thoughtSignature; thought parts dropped)."""
    recorded = _recorded("gemini-cli-tool-round-trip")["body"]
    opening = {**copy.deepcopy(recorded), "contents": recorded["contents"][:1]}
    parts = _gemini_parts(server, opening, stream)
    assert any(p.get("thought") for p in parts)  # the recorded request asks for thoughts
    [call] = [p for p in parts if "functionCall" in p]
    assert call["functionCall"]["name"] == "run_shell_command" and call.get("thoughtSignature")
    if not keep_signature:
        call = {"functionCall": call["functionCall"]}
    result = copy.deepcopy(recorded["contents"][2])
    result["parts"][0]["functionResponse"]["id"] = call["functionCall"]["id"]
    return _gemini_parts(server, {**opening, "contents": [*opening["contents"], {"role": "model", "parts": [call]},
                                                          result]}, stream)


@pytest.mark.parametrize("stream", [True, False])
def test_a_gemini_cli_tool_loop_keeps_thinking_on_the_strong_backend(sim, server, stream):
    """Gemini CLI sends back each function call's `thoughtSignature`: route writes the signed
    thinking there, and it comes back to the backend that refuses the loop without it."""
    sim.script(STRONG, [{"tool_calls": [SHELL]}, FINAL])
    final = _gemini_loop(server, stream, keep_signature=True)
    assert "".join(p.get("text", "") for p in final if not p.get("thought")) == FINAL
    assert any(p.get("thought") for p in final)  # it thought again: thinking stayed on
    assert sim.stats(STRONG)["completed"] == 2 and sim.stats(MEDIUM)["requests"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_google_genai_tool_loop_keeps_thinking_on_the_strong_backend(sim, server, stream):
    """The SDK reads a `thoughtSignature` as base64 bytes and writes it back the same: route's
    signature is base64, so it parses, and comes back whole."""
    from google import genai
    from google.genai import types

    sim.script(STRONG, [{"tool_calls": [SHELL]}, FINAL])
    client = genai.Client(api_key="unused", http_options=types.HttpOptions(
        base_url=server.url, retry_options=types.HttpRetryOptions(attempts=1)))
    shell = types.FunctionDeclaration(name="run_shell_command", parameters_json_schema={
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[shell])],
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))

    def answer(contents: list[types.Content]) -> list[types.Part]:
        if stream:
            return [part for chunk in client.models.generate_content_stream(model="auto", contents=contents, config=config)
                    for part in (chunk.candidates or [types.Candidate()])[0].content.parts or ()]
        response = client.models.generate_content(model="auto", contents=contents, config=config)
        return list(response.candidates[0].content.parts or ())

    asked = [types.Content(role="user", parts=[types.Part(text="Run echo corpus-ok")])]
    parts = answer(asked)
    [call] = [part for part in parts if part.function_call]
    assert call.thought_signature and any(part.thought for part in parts)
    result = types.FunctionResponse(id=call.function_call.id, name="run_shell_command", response={"output": "corpus-ok"})
    final = answer([*asked, types.Content(role="model", parts=parts),
                    types.Content(role="user", parts=[types.Part(function_response=result)])])
    assert "".join(part.text or "" for part in final if not part.thought) == FINAL
    assert any(part.thought for part in final)  # it thought again: thinking stayed on
    assert sim.stats(STRONG)["completed"] == 2 and sim.stats(MEDIUM)["requests"] == 0


def test_a_gemini_client_that_drops_the_signature_is_answered_without_thinking(sim, server):
    sim.script(STRONG, [{"tool_calls": [SHELL]}, FINAL])
    final = _gemini_loop(server, stream=True, keep_signature=False)
    assert [p for p in final if p.get("text")] == [{"text": FINAL}]  # answered, without thinking
    assert sim.stats(STRONG)["completed"] == 2


# -- the rule as the simulator keeps it -----------------------------------------------------------


def _messages_call(sim, turns: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    body = {"model": STRONG, "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": turns, **extra}
    return httpx.post(sim.url + "/v1/messages", json=body, timeout=10)


def test_the_simulator_refuses_a_tool_loop_without_its_signed_thinking(sim):
    sim.update_profile(STRONG, signed_thinking=True)
    sim.script(STRONG, [{"tool_calls": [EXEC]}, FINAL])
    ask = [{"role": "user", "content": "run it"}]
    answer = _messages_call(sim, ask).json()
    assert [b["type"] for b in answer["content"]] == ["thinking", "tool_use"]
    thinking, call = answer["content"]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "corpus-ok"}]}

    def sent(*blocks: dict[str, Any]) -> httpx.Response:
        return _messages_call(sim, [*ask, {"role": "assistant", "content": list(blocks)}, result])

    missing, forged = sent(call), sent({**thinking, "thinking": thinking["thinking"] + " and more"}, call)
    assert missing.status_code == forged.status_code == 400
    assert missing.json()["type"] == "error" and missing.json()["error"]["type"] == "invalid_request_error"
    assert "must start with a thinking block" in missing.json()["error"]["message"]
    assert "Invalid `signature`" in forged.json()["error"]["message"]
    assert sent(thinking, call).status_code == 200
    # thinking off: no rule to keep
    assert _messages_call(sim, [*ask, {"role": "assistant", "content": [call]}, result],
                          thinking={"type": "disabled"}).status_code == 200


def test_the_simulator_refuses_a_budget_anthropic_refuses(sim):
    ask = [{"role": "user", "content": "hi"}]
    assert _messages_call(sim, ask, max_tokens=2048).status_code == 400  # budget 2048 not under max_tokens
    assert _messages_call(sim, ask, thinking={"type": "enabled", "budget_tokens": 512}).status_code == 400


# -- redacted thinking, in every protocol ---------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_redacted_thinking_round_trips_through_chat(sim, server, stream):
    sim.script(STRONG, [{"tool_calls": [BASH]}, FINAL])
    ask = {"model": "auto", "reasoning_effort": "medium", "stream": stream,
           "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
           "messages": [{"role": "user", "content": f"run it {REDACTED_TRIGGER}"}]}
    answer = _chat_answer(server, ask)
    assert [b["type"] for b in answer["thinking_blocks"]] == ["redacted_thinking", "thinking"]
    final = _chat_answer(server, {**ask, "messages": [
        *ask["messages"], {"role": "assistant", "content": "", "tool_calls": answer["tool_calls"],
                           "thinking_blocks": answer["thinking_blocks"]},  # as LiteLLM's clients send them
        {"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": "corpus-ok"}]})
    assert final["content"] == FINAL and final["reasoning_content"]


def test_redacted_thinking_round_trips_through_messages_streamed(sim, server):
    sim.script(STRONG, [{"tool_calls": [BASH]}, FINAL])
    ask = {"model": "auto", "max_tokens": 8192, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 2048},
           "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
           "messages": [{"role": "user", "content": f"run it {REDACTED_TRIGGER}"}]}
    response, events = _post(server, "/v1/messages", ask)
    _on_strong(response)
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        if event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            for key, field in (("thinking_delta", "thinking"), ("signature_delta", "signature")):
                if delta["type"] == key:
                    block[field] = block.get(field, "") + delta[field]
            if delta["type"] == "input_json_delta":
                block["json"] = block.get("json", "") + delta["partial_json"]
    content = [blocks[i] for i in sorted(blocks)]
    assert [b["type"] for b in content] == ["redacted_thinking", "thinking", "tool_use"]
    call = content[2]
    sent = [*content[:2], {"type": "tool_use", "id": call["id"], "name": call["name"], "input": json.loads(call["json"])}]
    final = _post(server, "/v1/messages", {**ask, "stream": False, "messages": [
        *ask["messages"], {"role": "assistant", "content": sent},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "corpus-ok"}]}]})[0]
    _on_strong(final)
    assert [b["type"] for b in final.json()["content"]] == ["thinking", "text"]


def test_redacted_thinking_round_trips_in_encrypted_content(sim, server):
    sim.script(STRONG, [{"tool_calls": [EXEC]}, FINAL])
    ask = {"model": "auto", "input": f"run it {REDACTED_TRIGGER}", "reasoning": {"effort": "low"},
           "include": ["reasoning.encrypted_content"],
           "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]}
    first = _post(server, "/v1/responses", ask)[0]
    reasoning, call = first.json()["output"]
    assert reasoning["summary"] == []  # no summary asked for
    again = _post(server, "/v1/responses", {**ask, "input": [
        {"role": "user", "content": ask["input"]}, reasoning, call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "corpus-ok"}]})[0]
    _on_strong(again)
    assert [item["type"] for item in again.json()["output"]] == ["reasoning", "message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_the_litellm_kind_reads_and_sends_back_signed_thinking(sim, monkeypatch, stream):
    """Through litellm's Anthropic provider: the signed blocks it reads are the answer's
    `thinking_blocks`, and sent back on the assistant turn they keep the loop going."""
    from backends import build_backend
    from backends.base import BackendSettings
    from backends.types import Request

    known = "claude-sonnet-4-5"  # litellm passes `thinking` only for a model its map says can think
    monkeypatch.setenv("SIM_ANTHROPIC_KEY", "sk-ant-simulated")
    sim.update_profile(known, signed_thinking=True, ttft_s=0.0, tokens_per_s=None)
    sim.script(known, [{"tool_calls": [BASH]}, FINAL])
    backend = build_backend("litellm", BackendSettings(name="claude", model=f"anthropic/{known}", base_url=sim.url,
                                                       api_key_env="SIM_ANTHROPIC_KEY", max_retries=0))
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    ask = [{"role": "user", "content": f"run it {REDACTED_TRIGGER}"}]

    async def answer(messages: list[dict[str, Any]]):
        request = Request(messages=messages, max_tokens=4096,
                          extra={"tools": tools, "thinking": {"type": "enabled", "budget_tokens": 1024}})
        if stream:
            return [c async for c in backend.stream(request)][-1].completion
        return await backend.complete(request)

    try:
        first = await answer(ask)
        signed = first.metadata["thinking_blocks"]
        assert [b["type"] for b in signed] == ["redacted_thinking", "thinking"] and signed[1]["signature"]
        final = await answer([*ask, {"role": "assistant", "content": "", "tool_calls": first.tool_calls,
                                     "thinking_blocks": signed},
                              {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "content": "corpus-ok"}])
    finally:
        await backend.aclose()
    assert final.text == FINAL and final.thinking
