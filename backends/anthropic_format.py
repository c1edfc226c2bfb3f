"""Anthropic Messages requests and OpenAI chat requests, translated both ways, in one place:
`route serve`'s /v1/messages and the simulator read Anthropic requests as chat messages; the
`anthropic` backend kind writes chat messages as an Anthropic request. Plain data in, plain data
out: no I/O. (Answers: backends/anthropic_answers.py.)

Anthropic -> chat: `system` becomes a system message; `tool_use` blocks an assistant turn's
`tool_calls`; `tool_result` blocks `tool` messages (before the rest of that user turn); images
`image_url` parts. Chat -> Anthropic is the inverse, merging consecutive turns of one role, as
Anthropic requires turns to alternate.

What only Anthropic reads survives the round trip, in the chat-format conventions LiteLLM and
OpenRouter use: `cache_control` markers on content parts, on tools, on tool calls and (for a
tool result or a whole turn) on the message; signed thinking blocks of earlier turns as the
assistant message's `thinking_blocks`. Parts with markers are kept as parts (never joined into
a string, which would lose where the marker was).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from backends.client_fields import beta_names
from backends.types import Message

__all__ = [
    "ANTHROPIC_ONLY",
    "FINISH_REASONS",
    "STOP_REASONS",
    "Unsupported",
    "chat_messages",
    "chat_response_format",
    "chat_tool_choice",
    "chat_tools",
    "request_options",
    "reasoning_effort",
    "request_parts",
    "thinking_budget",
    "tool_input",
]

# OpenAI finish reason -> Anthropic stop reason, and back.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                "content_filter": "refusal"}
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                  "refusal": "content_filter", "pause_turn": "stop"}
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
# Request fields only Anthropic reads, carried in a chat request's extras for an anthropic backend;
# other kinds have their meaning already (reasoning_effort, response_format) or none.
ANTHROPIC_ONLY = frozenset({"output_config", "anthropic_beta", "context_management"})
# reasoning_effort -> Anthropic's thinking budget (tokens), as LiteLLM maps them.
_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096, "xhigh": 8192}
_MIN_BUDGET = 1024  # Anthropic's smallest
_THINKING_SHARE = 0.5  # of a client's maximum, what thinking may take: the rest is the answer's
_MID_CONVERSATION_SYSTEM = "mid-conversation-system"


class Unsupported(ValueError):
    """A request holds something the other format cannot say; the message names it."""


def _marked(target: dict[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    """`target` with the cache marker `source` carries, if any."""
    if source.get("cache_control") is not None:
        target["cache_control"] = source["cache_control"]
    return target


# -- Anthropic -> chat --------------------------------------------------------------------------


def _image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "url":
        url = source.get("url")
    elif source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    else:
        raise Unsupported(f"image source type {source.get('type')!r} is not supported; send base64 or url images")
    return _marked({"type": "image_url", "image_url": {"url": url}}, block)


_ERROR_OPENING = "Error: "  # how a failed tool result reads where the flag cannot travel (chat backends)


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    text = content if isinstance(content, str) else "\n".join(
        str(part.get("text", "")) for part in content or () if part.get("type") == "text")
    return f"{_ERROR_OPENING}{text}" if block.get("is_error") else text


def _text_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Plain text reaches every backend; parts stay parts when one is not text or carries a marker."""
    if all(p["type"] == "text" and "cache_control" not in p for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _user_turn(blocks: Iterable[Mapping[str, Any]]) -> list[Message]:
    results: list[Message] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            result = {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": _result_text(block)}
            if isinstance(block.get("is_error"), bool):  # the client's own word on the step, kept (policies/sessions.py)
                result["is_error"] = block["is_error"]
            results.append(_marked(result, block))
        elif kind == "text":
            parts.append(_marked({"type": "text", "text": block.get("text", "")}, block))
        elif kind == "image":
            parts.append(_image_part(block))
        elif kind not in _THINKING_BLOCKS:
            raise Unsupported(f"content block type {kind!r} is not supported; send text, image, tool_use or "
                              "tool_result blocks")
    return [*results, {"role": "user", "content": _text_content(parts)}] if parts else results


def _assistant_turn(blocks: Iterable[Mapping[str, Any]]) -> Message:
    blocks = list(blocks)
    texts = [_marked({"type": "text", "text": str(b.get("text", ""))}, b) for b in blocks if b.get("type") == "text"]
    calls = [_marked({"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"),
                                   "arguments": json.dumps(b.get("input") or {}, separators=(",", ":"))}}, b)
             for b in blocks if b.get("type") == "tool_use"]
    message: Message = {"role": "assistant", "content": (_text_content(texts) or None) if texts else None}
    if calls:
        message["tool_calls"] = calls
    thinking = [dict(b) for b in blocks if b.get("type") in _THINKING_BLOCKS]
    if thinking:
        message["thinking_blocks"] = thinking  # sent back to Anthropic, which checks their signatures
    return message


def _system_content(blocks: str | Sequence[Mapping[str, Any]]) -> str | list[dict[str, Any]]:
    if isinstance(blocks, str):
        return blocks
    return _text_content([_marked({"type": "text", "text": str(b.get("text", ""))}, b) for b in blocks])


def chat_messages(system: str | Sequence[Mapping[str, Any]] | None, turns: Iterable[Mapping[str, Any]]) -> list[Message]:
    """An Anthropic request's `system` and `messages` as chat messages."""
    out: list[Message] = []
    if system:
        out.append({"role": "system", "content": _system_content(system)})
    for turn in turns:
        content = turn.get("content")
        if isinstance(content, str):
            out.append({"role": turn.get("role"), "content": content})
        elif turn.get("role") == "system":
            out.append({"role": "system", "content": _system_content(content or ())})
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
        out.append(_marked({"type": "function", "function": {"name": tool.get("name"),
                                                             "description": tool.get("description") or "",
                                                             "parameters": schema}}, tool))
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


def reasoning_effort(thinking: Mapping[str, Any]) -> str | None:
    """An Anthropic `thinking` setting as chat's `reasoning_effort`; None where the model is to
    decide (`adaptive`, or a type this router does not know): no effort is asked of the others."""
    kind = thinking.get("type")
    if kind == "disabled":
        return "none"
    if kind != "enabled":
        return None
    budget = int(thinking.get("budget_tokens") or _MIN_BUDGET)
    return "low" if budget <= _BUDGETS["low"] else "medium" if budget <= _BUDGETS["medium"] else "high"


def chat_response_format(output_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Anthropic's `output_config.format` (a JSON schema the answer must follow) as chat's
    `response_format`."""
    if not output_format or output_format.get("type") != "json_schema" or not isinstance(output_format.get("schema"), Mapping):
        return None
    return {"type": "json_schema", "json_schema": {"name": str(output_format.get("name") or "output"),
                                                   "schema": dict(output_format["schema"])}}


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
            blocks.append(_marked({"type": "text", "text": part.get("text", "")}, part))
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            head, _, data = url.partition(";base64,")
            source = ({"type": "base64", "media_type": head.removeprefix("data:"), "data": data}
                      if url.startswith("data:") else {"type": "url", "url": url})
            blocks.append(_marked({"type": "image", "source": source}, part))
    return blocks


def _thinking_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An earlier turn's thinking as Anthropic checks it: signed or redacted blocks only (thinking
    from another model has no signature Anthropic would accept)."""
    return [dict(b) for b in message.get("thinking_blocks") or ()
            if isinstance(b, Mapping) and (b.get("signature") or b.get("type") == "redacted_thinking")]


def _anthropic_turn(message: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    role = message.get("role")
    if role == "tool":
        flag, content = message.get("is_error"), message.get("content")
        if flag is True and isinstance(content, str) and content.startswith(_ERROR_OPENING):
            content = content[len(_ERROR_OPENING):]  # the opening _result_text wrote for chat backends
        result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": _blocks(content) or ""}
        if isinstance(flag, bool):
            result["is_error"] = flag
        return "user", [_marked(result, message)]
    blocks = _thinking_blocks(message) if role == "assistant" else []
    blocks += _blocks(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(_marked({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                               "input": tool_input(function.get("arguments") or "")}, call))
    if message.get("cache_control") is not None and blocks and "cache_control" not in blocks[-1]:
        blocks[-1] = _marked(dict(blocks[-1]), message)  # a marker on the whole turn: at its end
    return ("assistant" if role == "assistant" else "user"), blocks


def _system(messages: Iterable[Message]) -> str | list[dict[str, Any]] | None:
    blocks: list[dict[str, Any]] = []
    for message in messages:
        own = [b for b in _blocks(message.get("content")) if b["type"] == "text"]
        if message.get("cache_control") is not None and own:
            own[-1] = _marked(own[-1], message)
        blocks += own
    if not blocks:
        return None
    if any("cache_control" in b for b in blocks):
        return blocks
    return "\n\n".join(b["text"] for b in blocks)


def _in_place(extra: Mapping[str, Any], betas: Iterable[str]) -> bool:
    """Whether system turns within the conversation stay where they are: Anthropic takes them
    there under its mid-conversation-system beta (the client's, or the backend's configured
    `anthropic-beta` header); without it they join the system prompt, the only place it takes them."""
    return any(str(b).strip().startswith(_MID_CONVERSATION_SYSTEM)
               for b in [*beta_names(extra.get("anthropic_beta")), *betas])


def request_parts(messages: Iterable[Message], extra: Mapping[str, Any], betas: Iterable[str] = ()) -> dict[str, Any]:
    """`system`, `messages`, `tools` and `tool_choice` of an Anthropic request for a chat request;
    `betas`: the betas the backend's own configuration sends."""
    messages = list(messages)
    leading = next((i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")), len(messages))
    in_place = _in_place(extra, betas)
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            if index >= leading and in_place:
                turns.append({"role": "system", "content": _blocks(message.get("content"))})
            continue
        role, blocks = _anthropic_turn(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    parts: dict[str, Any] = {"messages": turns}
    system = _system(m for i, m in enumerate(messages)
                     if m.get("role") in ("system", "developer") and (i < leading or not in_place))
    if system:
        parts["system"] = system
    tools = [_marked({"name": t["function"]["name"], "description": t["function"].get("description", ""),
                      "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}, t)
             for t in extra.get("tools") or () if t.get("type") == "function"]
    if tools:
        parts["tools"] = tools
        choice = _anthropic_tool_choice(extra.get("tool_choice"), extra.get("parallel_tool_calls"))
        if choice is not None:
            parts["tool_choice"] = choice
    return parts


def _anthropic_tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    if isinstance(choice, Mapping):
        out: dict[str, Any] | None = {"type": "tool", "name": (choice.get("function") or {}).get("name")}
    else:
        out = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(str(choice))
    if parallel is False:
        out = {**(out or {"type": "auto"}), "disable_parallel_tool_use": True}
    return out


def thinking_budget(effort: Any, max_tokens: int | None) -> int | None:
    """The thinking budget for a `reasoning_effort`: LiteLLM's budgets, and under a maximum the
    client set, at most half of it, so the answer keeps the other half (Anthropic counts thinking
    in `max_tokens`). None: no thinking (no effort asked, or no room for Anthropic's smallest)."""
    if not isinstance(effort, str) or effort not in _BUDGETS:
        return None
    budget = _BUDGETS[effort] if max_tokens is None else min(_BUDGETS[effort], int(max_tokens * _THINKING_SHARE))
    return budget if budget >= _MIN_BUDGET else None


def request_options(extra: Mapping[str, Any], max_tokens: int | None) -> dict[str, Any]:
    """The options of an Anthropic request a chat request's extras say: thinking (the client's
    own `thinking` object, or a budget for `reasoning_effort`: `thinking_budget`), `output_config`
    (the client's own, or a JSON schema from `response_format`), `metadata.user_id` (from
    `user`), `top_k`, `service_tier`. `max_tokens`: the maximum the client (or the config) set,
    None for none."""
    out: dict[str, Any] = {}
    output = extra.get("output_config")
    fmt = extra.get("response_format")
    if isinstance(output, Mapping):
        out["output_config"] = dict(output)
    elif isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        out["output_config"] = {"format": {"type": "json_schema", "schema": spec.get("schema") or {}}}
    thinking = extra.get("thinking")
    effort = extra.get("reasoning_effort")
    budget = thinking_budget(effort, max_tokens)
    if isinstance(thinking, Mapping):
        out["thinking"] = dict(thinking)
    elif budget is not None:
        out["thinking"] = {"type": "enabled", "budget_tokens": budget}
    metadata = extra.get("metadata")
    user = extra.get("user") or (metadata.get("user_id") if isinstance(metadata, Mapping) else None)
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}  # the only metadata Anthropic takes
    if isinstance(extra.get("top_k"), int):
        out["top_k"] = extra["top_k"]
    if isinstance(extra.get("context_management"), Mapping):
        out["context_management"] = dict(extra["context_management"])
    if extra.get("service_tier") in ("auto", "standard_only"):
        out["service_tier"] = extra["service_tier"]
    return out
