"""What a client receives, read back into an `Answer` as that client's SDK would assemble it.

Each reader follows its protocol's rules as the clients apply them, not route's own writers:
a chat client takes a tool call's id and name from the first delta of its index and appends
every later `arguments` piece (a name on a later piece is ignored, as the openai SDK and
OpenCode do); a Messages client takes a block's name and id from `content_block_start`; a
Responses client (Codex) keeps each `response.output_item.done` item; a Gemini client (the
google-genai SDK, Gemini CLI) joins the parts of every response in turn. A stream whose events
disagree with its own final summary (Responses' `response.completed`) fails here: the client
would see one or the other.
"""

from __future__ import annotations

import json
from typing import Any

from router.server.protocols.reasoning import blocks_from
from tests.conformance.answer import Answer, Call, Sealed, Usage

__all__ = ["read", "sse_events"]

_CHAT_STOP = {"stop": "end", "length": "length", "tool_calls": "tool"}
_MESSAGES_STOP = {"end_turn": "end", "max_tokens": "length", "tool_use": "tool", "stop_sequence": "end"}


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON of every `data:` line ([DONE] left out), in order."""
    out = []
    for block in raw.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                out.append(json.loads(line[5:]))
    return out


def _sealed_of(blocks: list[dict[str, Any]]) -> tuple[Sealed, ...]:
    return tuple(Sealed(data=b["data"]) if b["type"] == "redacted_thinking"
                 else Sealed(b.get("thinking", ""), b.get("signature")) for b in blocks)


# -- chat completions ---------------------------------------------------------------------------


def _chat_usage(usage: dict[str, Any] | None) -> Usage | None:
    if not usage:
        return None
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    write = usage.get("cache_creation_input_tokens") or 0
    return Usage(usage["prompt_tokens"] - cached - write, usage["completion_tokens"], cached, write)


def _chat_whole(body: dict[str, Any]) -> tuple[Answer, Usage | None]:
    choice = body["choices"][0]
    message = choice["message"]
    calls = tuple(Call(c["id"], c["function"]["name"], c["function"]["arguments"])
                  for c in message.get("tool_calls") or ())
    answer = Answer(text=message.get("content") or "", thinking=message.get("reasoning_content") or "",
                    sealed=_sealed_of(message.get("thinking_blocks") or []), calls=calls,
                    stop=_CHAT_STOP[choice["finish_reason"]])
    return answer, _chat_usage(body.get("usage"))


def _chat_stream(raw: bytes) -> tuple[Answer, Usage | None]:
    text, thinking, sealed = [], [], []
    calls: dict[int, dict[str, str]] = {}
    stop, usage = None, None
    for event in sse_events(raw):
        if "error" in event:
            raise StreamFailed(event["error"])
        if event.get("usage"):
            usage = _chat_usage(event["usage"])
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            thinking.append(delta.get("reasoning_content") or "")
            sealed += delta.get("thinking_blocks") or []
            for piece in delta.get("tool_calls") or ():
                call = calls.get(piece["index"])
                if call is None:  # the first piece of an index says which call it is
                    call = calls[piece["index"]] = {"id": piece.get("id") or "",
                                                    "name": (piece.get("function") or {}).get("name") or "",
                                                    "arguments": ""}
                call["arguments"] += (piece.get("function") or {}).get("arguments") or ""
            if choice.get("finish_reason"):
                stop = choice["finish_reason"]
    answer = Answer(text="".join(text), thinking="".join(thinking), sealed=_sealed_of(sealed),
                    calls=tuple(Call(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())),
                    stop=_CHAT_STOP[stop] if stop else "missing")
    return answer, usage


# -- Messages -----------------------------------------------------------------------------------


def _messages_usage(usage: dict[str, Any]) -> Usage:
    return Usage(usage.get("input_tokens") or 0, usage.get("output_tokens") or 0,
                 usage.get("cache_read_input_tokens") or 0, usage.get("cache_creation_input_tokens") or 0)


def _messages_answer(blocks: list[dict[str, Any]], stop: str | None) -> Answer:
    text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
    thinking = "".join(b.get("thinking", "") for b in blocks if b["type"] == "thinking")
    sealed = _sealed_of([b for b in blocks if b["type"] == "redacted_thinking"
                         or (b["type"] == "thinking" and b.get("signature"))])
    calls = tuple(Call(b["id"], b["name"], b["arguments"] if "arguments" in b else json.dumps(b["input"]))
                  for b in blocks if b["type"] == "tool_use")
    return Answer(text=text, thinking=thinking, sealed=sealed, calls=calls,
                  stop=_MESSAGES_STOP[stop] if stop else "missing")


def _messages_stream(raw: bytes) -> tuple[Answer, Usage | None]:
    blocks: dict[int, dict[str, Any]] = {}
    stop, usage = None, {}
    for event in sse_events(raw):
        kind = event["type"]
        if kind == "error":
            raise StreamFailed(event["error"])
        if kind == "message_start":
            usage.update(event["message"]["usage"])
        elif kind == "content_block_start":
            block = dict(event["content_block"])
            if block["type"] == "tool_use":
                block["arguments"] = ""
            blocks[event["index"]] = block
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                block["arguments"] += delta["partial_json"]
        elif kind == "message_delta":
            stop = event["delta"].get("stop_reason")
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
    for block in blocks.values():  # as the SDK does: the joined JSON is the input
        if block["type"] == "tool_use":
            block["arguments"] = json.dumps(json.loads(block["arguments"] or "{}"))
    return _messages_answer([blocks[i] for i in sorted(blocks)], stop), _messages_usage(usage)


# -- Responses ----------------------------------------------------------------------------------


def _responses_answer(items: list[dict[str, Any]], status: str, details: dict[str, Any] | None) -> Answer:
    text, thinking, sealed, calls = [], [], [], []
    for item in items:
        if item["type"] == "message":
            text += [part.get("text", "") for part in item.get("content") or () if part["type"] == "output_text"]
        elif item["type"] == "reasoning":
            thinking += [part.get("text", "") for part in item.get("content") or ()]
            sealed += blocks_from(item.get("encrypted_content"))
        elif item["type"] == "function_call":
            calls.append(Call(item["call_id"], item["name"], item["arguments"]))
    if status == "incomplete":
        stop = "length" if (details or {}).get("reason") == "max_output_tokens" else "missing"
    else:
        stop = "tool" if calls else "end"
    return Answer(text="".join(text), thinking="".join(thinking), sealed=_sealed_of(sealed), calls=tuple(calls),
                  stop=stop)


def _responses_usage(usage: dict[str, Any] | None) -> Usage | None:
    if not usage:
        return None
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(usage["input_tokens"] - cached, usage["output_tokens"], cached)


def _responses_stream(raw: bytes) -> tuple[Answer, Usage | None]:
    events = sse_events(raw)
    failed = [e for e in events if e["type"] in ("error", "response.failed")]
    if failed:
        raise StreamFailed(failed[0])
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    completed = next(e["response"] for e in events if e["type"] in ("response.completed", "response.incomplete"))
    streamed = _responses_answer(done, completed["status"], completed.get("incomplete_details"))
    summary = _responses_answer(completed["output"], completed["status"], completed.get("incomplete_details"))
    assert streamed == summary, f"the stream's items and response.completed disagree:\n{streamed}\n{summary}"
    # what a client that reads the deltas shows: the same text and arguments
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == streamed.text, (deltas, streamed.text)
    return streamed, _responses_usage(completed.get("usage"))


# -- Gemini -------------------------------------------------------------------------------------


def _gemini_fold(responses: list[dict[str, Any]]) -> tuple[Answer, Usage | None]:
    """Responses as the google-genai SDK and Gemini CLI join them: each one's parts in order,
    the last finish reason and usage."""
    text, thinking, calls = [], [], []
    finish, usage = None, None
    for response in responses:
        if "error" in response:
            raise StreamFailed(response["error"])
        for candidate in response.get("candidates") or ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                if "functionCall" in part:
                    call = part["functionCall"]
                    calls.append(Call(call.get("id") or "", call["name"], json.dumps(call.get("args") or {})))
                elif part.get("thought"):
                    thinking.append(part.get("text") or "")
                else:
                    text.append(part.get("text") or "")
            finish = candidate.get("finishReason") or finish
        usage = response.get("usageMetadata") or usage
    stop = {"STOP": "tool" if calls else "end", "MAX_TOKENS": "length"}.get(finish or "", "missing")
    answer = Answer(text="".join(text), thinking="".join(thinking), calls=tuple(calls), stop=stop)
    if not usage:
        return answer, None
    cached = usage.get("cachedContentTokenCount") or 0
    output = usage.get("candidatesTokenCount", 0) + usage.get("thoughtsTokenCount", 0)  # Gemini counts thoughts apart
    return answer, Usage(usage.get("promptTokenCount", 0) - cached, output, cached)


class StreamFailed(Exception):
    """The stream told the client it failed (an error event)."""


def read(protocol: str, raw: bytes, *, stream: bool) -> tuple[Answer, Usage | None]:
    if protocol == "chat":
        return _chat_stream(raw) if stream else _chat_whole(json.loads(raw))
    if protocol == "messages":
        if stream:
            return _messages_stream(raw)
        body = json.loads(raw)
        return _messages_answer(body["content"], body["stop_reason"]), _messages_usage(body["usage"])
    if protocol == "responses":
        if stream:
            return _responses_stream(raw)
        body = json.loads(raw)
        return (_responses_answer(body["output"], body["status"], body.get("incomplete_details")),
                _responses_usage(body.get("usage")))
    if protocol == "gemini":
        return _gemini_fold(sse_events(raw) if stream else [json.loads(raw)])
    raise ValueError(protocol)
