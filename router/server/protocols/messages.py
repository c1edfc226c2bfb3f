"""The Anthropic Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) as a dialect,
translated to and from the router's chat-format call.

The request is checked against messages_schema.py; the content translation is
backends/anthropic_format.py, shared with the `anthropic` backend kind and the simulator.
Cache markers and the signed thinking of earlier turns are kept in the chat-format conventions
that backends/anthropic_format.py writes back for an `anthropic` backend; `thinking`,
`metadata.user_id`, `top_k` and `service_tier` are sent on (and `thinking` also as the
`reasoning_effort` other kinds read). Answers: thinking, text and `tool_use` blocks, OpenAI
finish reasons as Anthropic stop reasons, usage with the cache's reads and writes apart. Streams
follow Anthropic's event sequence (backends/anthropic_events.py). Errors:
`{"type": "error", "error": {"type", "message"}}`.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from backends.anthropic_events import MessageEvents
from backends.anthropic_format import (
    STOP_REASONS,
    Unsupported,
    chat_messages,
    chat_response_format,
    chat_tool_choice,
    chat_tools,
    reasoning_effort,
    tool_input,
)
from backends.types import Completion, Message, ToolCallChunk
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts, bad_request, decode, route_options, session_field, validated
from router.server.protocols.messages_schema import COUNT_TOKENS_REQUEST, MESSAGES_REQUEST, MessagesRequest

__all__ = ["MessagesDialect", "count_tokens", "error_type", "stop_reason"]

_REFERENCE = "https://docs.anthropic.com/en/api/messages"
_WHAT = "a Messages object with `model`, `max_tokens` and `messages`"
# Anthropic's error `type` for each HTTP status it uses; other statuses fall back by class.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                503: "overloaded_error", 529: "overloaded_error"}


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")


def error_body(err: ApiError) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": error_type(err.status), "message": err.message}})


def stop_reason(completion: Completion) -> str:
    if completion.tool_calls:
        return "tool_use"
    return STOP_REASONS.get(completion.finish_reason or "stop", "end_turn")


def _translated(body: dict[str, Any]) -> tuple[list[Message], list[dict[str, Any]] | None]:
    """Chat messages and tools (backends/anthropic_format.py); a 400 naming what cannot be said."""
    try:
        return chat_messages(body.get("system"), body["messages"]), chat_tools(body.get("tools"))
    except Unsupported as exc:
        raise bad_request(f"{exc} (this router translates Messages to chat completions)") from None


def count_tokens(raw: bytes) -> int:
    """An estimate (about four characters a token, as the router's context check counts): the
    router has no tokenizer for every backend, and agents use this only to budget context."""
    body = decode(raw, "a count_tokens object with `model` and `messages`")
    validated(COUNT_TOKENS_REQUEST, body, _REFERENCE)
    messages, tools = _translated(body)
    return max(1, (len(orjson.dumps(messages)) + len(orjson.dumps(tools or []))) // 4)


def _tool_blocks(completion: Completion) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
             "name": call["function"]["name"], "input": tool_input(call["function"].get("arguments", ""))}
            for call in completion.tool_calls or ()]


def _usage(completion: Completion) -> dict[str, int]:
    u = completion.usage
    return {"input_tokens": u.uncached_input_tokens, "cache_creation_input_tokens": u.cache_write_tokens,
            "cache_read_input_tokens": u.cache_read_tokens, "output_tokens": u.output_tokens}


def _thinking_blocks(completion: Completion) -> list[dict[str, Any]]:
    """The answer's thinking: the provider's own blocks when it signed them, else the text in one
    block with an empty signature (thinking from a model Anthropic cannot vouch for; it is not
    sent back to an Anthropic backend)."""
    sealed = completion.metadata.get("thinking_blocks")
    if sealed:
        return [dict(block) for block in sealed]
    return [{"type": "thinking", "thinking": completion.thinking, "signature": ""}] if completion.thinking else []


def _options(request: MessagesRequest, body: dict[str, Any]) -> dict[str, Any]:
    """What the request asks beyond messages and tools, in the router's (chat) terms."""
    extra: dict[str, Any] = {}
    if request.top_p is not None:
        extra["top_p"] = request.top_p
    if request.top_k is not None:
        extra["top_k"] = request.top_k
    if request.thinking is not None:
        thinking = request.thinking.model_dump(exclude_none=True)
        extra["thinking"] = thinking  # exact, for an anthropic backend
        effort = reasoning_effort(thinking)  # its meaning, for the others
        if effort is not None:
            extra["reasoning_effort"] = effort
    if request.output_config is not None:
        extra["output_config"] = request.output_config.model_dump(exclude_none=True)
        if request.output_config.effort is not None:
            extra["reasoning_effort"] = request.output_config.effort
        response_format = chat_response_format(request.output_config.format)
        if response_format is not None:
            extra["response_format"] = response_format
    if isinstance(body.get("context_management"), dict):
        extra["context_management"] = body["context_management"]
    if request.metadata is not None and request.metadata.user_id:
        extra["user"] = request.metadata.user_id
    if request.service_tier is not None:
        extra["service_tier"] = request.service_tier
    return extra


class _Events:
    """One stream's events. Thinking, text and tool calls go out as they come; a tool call the
    backend did not stream arrives whole with the final completion, one block with its input in
    one `input_json_delta`."""

    def __init__(self, call: Call):
        self._events = MessageEvents(call.model, f"msg_{uuid.uuid4().hex[:24]}",
                                     {"input_tokens": call.echo.get("input_estimate", 0), "output_tokens": 0})
        self._streamed: set[int] = set()

    def start(self) -> bytes:
        return self._events.start()

    def text(self, text: str) -> bytes:
        return self._events.text(text)

    def thinking(self, text: str, signature: str | None = None, redacted: str | None = None) -> bytes:
        if redacted is not None:  # a block of its own, with no text (backends/types.py)
            return self._events.redacted_thinking(redacted)
        return self._events.thinking(text, signature)

    def draft(self, text: str) -> bytes:
        return b""

    def tool_call(self, piece: ToolCallChunk) -> bytes:
        if piece.index not in self._streamed:
            self._streamed.add(piece.index)
            return self._events.tool_call(piece.index, call_id=piece.id or f"toolu_{uuid.uuid4().hex[:24]}",
                                          name=piece.name, arguments=piece.arguments)
        return self._events.tool_call(piece.index, arguments=piece.arguments)

    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes:
        out = []
        for index, block in enumerate(_tool_blocks(completion) if completion is not None else ()):
            if index in self._streamed:
                continue
            out.append(self._events.tool_call(index, call_id=block["id"], name=block["name"],
                                              arguments=orjson.dumps(block["input"]).decode()))
        reason = stop_reason(completion) if completion is not None else "end_turn"
        usage: dict[str, int] = _usage(completion) if completion is not None else {"output_tokens": 0}
        out.append(self._events.finish(reason, usage))
        return b"".join(out)

    def error(self, err: ApiError) -> bytes:
        return MessageEvents.error(error_type(err.status), err.message)


class MessagesDialect:
    """`POST /v1/messages`."""

    protocol = "anthropic"

    def parse(self, raw: bytes) -> Call:
        body = decode(raw, _WHAT)
        request = validated(MESSAGES_REQUEST, body, _REFERENCE)
        if "stream_options" in body:  # an OpenAI field: Anthropic's API refuses it, so does its protocol here
            raise bad_request("`stream_options` is not a Messages field (it is OpenAI's); a streamed Message "
                              "always ends with its usage: drop it", "stream_options")
        messages, tools = _translated(body)
        extra: dict[str, Any] = {}
        if tools:
            extra["tools"] = tools
            try:
                choice = chat_tool_choice(body.get("tool_choice"))
            except Unsupported as exc:
                raise bad_request(str(exc), "tool_choice") from None
            if choice is not None:
                extra["tool_choice"] = choice
        extra.update(_options(request, body))
        estimate = max(1, len(orjson.dumps(messages)) // 4)
        # Claude Code's metadata.user_id names its session ("user_..._session_<uuid>").
        session = session_field(body, request.metadata.user_id if request.metadata is not None else None)
        return Call(model=request.model, messages=messages, stream=request.stream, max_tokens=request.max_tokens,
                    temperature=request.temperature, stop=request.stop_sequences or None, extra=extra,
                    echo={"input_estimate": estimate}, session=session, route=route_options(body))

    def error_body(self, err: ApiError) -> bytes:
        return error_body(err)

    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes:
        content = _thinking_blocks(completion)
        content += [{"type": "text", "text": completion.text}] if completion.text else []
        content += _tool_blocks(completion)
        return orjson.dumps({"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                             "model": call.model, "content": content, "stop_reason": stop_reason(completion),
                             "stop_sequence": None, "usage": _usage(completion)})

    def writer(self, call: Call) -> _Events:
        return _Events(call)
