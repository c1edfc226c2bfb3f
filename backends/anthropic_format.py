"""The Anthropic Messages format and the OpenAI chat format, translated both ways, in one place:
`route serve`'s /v1/messages and the simulator read Anthropic requests as chat messages; the
`anthropic` backend kind writes chat messages as an Anthropic request and reads its answers
back as Deltas. Plain data in, plain data out: no I/O.

Anthropic -> chat: `system` becomes a system message; `tool_use` blocks an assistant turn's
`tool_calls`; `tool_result` blocks `tool` messages (before the rest of that user turn); images
`image_url` parts; thinking blocks are dropped (only Anthropic can verify their signatures).
Chat -> Anthropic is the inverse, merging consecutive turns of one role, as Anthropic requires
turns to alternate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from backends.types import Message, Usage

__all__ = [
    "FINISH_REASONS",
    "STOP_REASONS",
    "StreamReader",
    "Unsupported",
    "chat_messages",
    "chat_tool_choice",
    "chat_tools",
    "message_delta",
    "request_parts",
    "tool_input",
]

# OpenAI finish reason -> Anthropic stop reason, and back.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                "content_filter": "refusal"}
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                  "refusal": "content_filter", "pause_turn": "stop"}
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


class Unsupported(ValueError):
    """A request holds something the other format cannot say; the message names it."""


# -- Anthropic -> chat --------------------------------------------------------------------------


def _image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "url":
        url = source.get("url")
    elif source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    else:
        raise Unsupported(f"image source type {source.get('type')!r} is not supported; send base64 or url images")
    return {"type": "image_url", "image_url": {"url": url}}


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    text = content if isinstance(content, str) else "\n".join(
        str(part.get("text", "")) for part in content or () if part.get("type") == "text")
    return f"Error: {text}" if block.get("is_error") else text


def _user_turn(blocks: Iterable[Mapping[str, Any]]) -> list[Message]:
    results: list[Message] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": _result_text(block)})
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append(_image_part(block))
        elif kind not in _DROPPED_BLOCKS:
            raise Unsupported(f"content block type {kind!r} is not supported; send text, image, tool_use or "
                              "tool_result blocks")
    if not parts:
        return results
    if all(p["type"] == "text" for p in parts):  # plain text reaches every backend; parts not all
        return [*results, {"role": "user", "content": "\n".join(p["text"] for p in parts)}]
    return [*results, {"role": "user", "content": parts}]


def _assistant_turn(blocks: Iterable[Mapping[str, Any]]) -> Message:
    blocks = list(blocks)
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    calls = [{"id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {}, separators=(",", ":"))}}
             for b in blocks if b.get("type") == "tool_use"]
    message: Message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


def chat_messages(system: str | Sequence[Mapping[str, Any]] | None, turns: Iterable[Mapping[str, Any]]) -> list[Message]:
    """An Anthropic request's `system` and `messages` as chat messages."""
    out: list[Message] = []
    if system:
        text = system if isinstance(system, str) else "\n".join(str(b.get("text", "")) for b in system)
        out.append({"role": "system", "content": text})
    for turn in turns:
        content = turn.get("content")
        if isinstance(content, str):
            out.append({"role": turn.get("role"), "content": content})
        elif turn.get("role") == "system":
            out.append({"role": "system", "content": "\n".join(str(b.get("text", "")) for b in content or ())})
        elif turn.get("role") == "assistant":
            out.append(_assistant_turn(content or ()))
        else:
            out.extend(_user_turn(content or ()))
    return out


def chat_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Anthropic client tools as chat tools; Unsupported for server tools (web search...)."""
    out = []
    for tool in tools or ():
        if tool.get("type") not in (None, "custom"):
            raise Unsupported(f"server tool {tool.get('name')!r} (type {tool.get('type')!r}) is not supported; "
                              "send client tools (name, description, input_schema) only")
        schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": {"name": tool.get("name"),
                                                     "description": tool.get("description") or "",
                                                     "parameters": schema}})
    return out or None


def chat_tool_choice(choice: Mapping[str, Any] | None) -> Any:
    kind = (choice or {}).get("type")
    if kind is None or kind == "auto":
        return None
    if kind == "tool":
        return {"type": "function", "function": {"name": (choice or {}).get("name")}}
    if kind in ("any", "none"):
        return "required" if kind == "any" else "none"
    raise Unsupported(f"tool_choice type {kind!r} is unknown; use auto, any, tool or none")


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as an Anthropic `input` object."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}  # a model's broken JSON, kept rather than lost
    return value if isinstance(value, dict) else {"value": value}


# -- chat -> Anthropic --------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content:
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            head, _, data = url.partition(";base64,")
            source = ({"type": "base64", "media_type": head.removeprefix("data:"), "data": data}
                      if url.startswith("data:") else {"type": "url", "url": url})
            blocks.append({"type": "image", "source": source})
    return blocks


def _anthropic_turn(message: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    role = message.get("role")
    if role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": message.get("tool_call_id"),
                         "content": _blocks(message.get("content")) or ""}]
    blocks = _blocks(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                       "input": tool_input(function.get("arguments") or "")})
    return ("assistant" if role == "assistant" else "user"), blocks


def request_parts(messages: Iterable[Message], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`system`, `messages`, `tools` and `tool_choice` of an Anthropic request for a chat request."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") in ("system", "developer"):
            system.extend(b["text"] for b in _blocks(message.get("content")) if b["type"] == "text")
            continue
        role, blocks = _anthropic_turn(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    parts: dict[str, Any] = {"messages": turns}
    if system:
        parts["system"] = "\n\n".join(system)
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
             for t in extra.get("tools") or () if t.get("type") == "function"]
    if tools:
        parts["tools"] = tools
        choice = _anthropic_tool_choice(extra.get("tool_choice"))
        if choice is not None:
            parts["tool_choice"] = choice
    return parts


def _anthropic_tool_choice(choice: Any) -> dict[str, Any] | None:
    if isinstance(choice, Mapping):
        return {"type": "tool", "name": (choice.get("function") or {}).get("name")}
    return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(str(choice))


# -- Anthropic answers -> chat deltas -----------------------------------------------------------


def message_delta(body: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], Usage | None, str | None]:
    """A whole Anthropic message as (text, tool call deltas, usage, finish reason)."""
    text = "".join(str(b.get("text", "")) for b in body.get("content") or () if b.get("type") == "text")
    calls = [{"index": i, "id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
             for i, b in enumerate(b for b in body.get("content") or () if b.get("type") == "tool_use")]
    usage = body.get("usage")
    used = Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)) if usage else None
    reason = body.get("stop_reason")
    return text, calls, used, FINISH_REASONS.get(reason, reason) if reason else None


class StreamReader:
    """Folds Anthropic stream events into chat-style pieces, one event at a time. Tool calls are
    numbered in the order their blocks start, as chat tool-call deltas are."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self._tools: dict[int, int] = {}  # content block index -> tool call index

    def read(self, event: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], Usage | None, str | None]:
        """(text, tool call deltas, usage, finish reason) carried by one event."""
        kind = event.get("type")
        if kind == "message_start":
            self.input_tokens = int(((event.get("message") or {}).get("usage") or {}).get("input_tokens") or 0)
        elif kind == "content_block_start":
            return self._block_start(event)
        elif kind == "content_block_delta":
            return self._block_delta(event)
        elif kind == "message_delta":
            usage = event.get("usage") or {}
            input_tokens = int(usage.get("input_tokens") or self.input_tokens)
            used = Usage(input_tokens, int(usage.get("output_tokens") or 0))
            reason = (event.get("delta") or {}).get("stop_reason")
            return "", [], used, FINISH_REASONS.get(reason, reason) if reason else None
        return "", [], None, None

    def _block_start(self, event: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], None, None]:
        block = event.get("content_block") or {}
        if block.get("type") == "text":
            return str(block.get("text") or ""), [], None, None
        if block.get("type") != "tool_use":
            return "", [], None, None
        index = self._tools[int(event.get("index") or 0)] = len(self._tools)
        return "", [{"index": index, "id": block.get("id"), "type": "function",
                     "function": {"name": block.get("name"), "arguments": ""}}], None, None

    def _block_delta(self, event: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], None, None]:
        delta = event.get("delta") or {}
        if delta.get("type") == "text_delta":
            return str(delta.get("text") or ""), [], None, None
        if delta.get("type") == "input_json_delta":
            index = self._tools.get(int(event.get("index") or 0), 0)
            return "", [{"index": index, "function": {"arguments": delta.get("partial_json") or ""}}], None, None
        return "", [], None, None  # thinking and signature deltas: not part of the answer
