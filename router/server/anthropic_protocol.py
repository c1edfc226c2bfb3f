"""The Anthropic Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`), translated to
and from the router's OpenAI-format call.

Request validation lives here (pydantic, ignoring fields the API keeps adding); the content
translation is backends/anthropic_format.py, shared with the `anthropic` backend kind and the
simulator. Answers: text and `tool_use` blocks,
OpenAI finish reasons as Anthropic stop reasons, usage. Streams follow Anthropic's event
sequence: message_start, content_block_start / _delta / _stop per block, message_delta (stop
reason, usage), message_stop. Errors: `{"type": "error", "error": {"type", "message"}}`.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backends.anthropic_format import STOP_REASONS, Unsupported, chat_messages, chat_tool_choice, chat_tools, tool_input
from backends.types import Completion, Message
from router.server.translated import Translated
from router.server.wire import ApiError

__all__ = ["AnthropicDialect", "count_tokens", "error_type", "stop_reason"]

# Anthropic's error `type` for each HTTP status it uses; other statuses fall back by class.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                503: "overloaded_error", 529: "overloaded_error"}


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")


def stop_reason(completion: Completion) -> str:
    if completion.tool_calls:
        return "tool_use"
    return STOP_REASONS.get(completion.finish_reason or "stop", "end_turn")


class _Lenient(BaseModel):
    # Agents send fields this API grows every month (metadata, thinking, betas...): ignore them.
    model_config = ConfigDict(extra="ignore")


class _InputMessage(_Lenient):
    # Claude Code sends `system` turns inside `messages` too (mid-conversation instructions).
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class _Tool(_Lenient):
    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    type: str | None = None


class CountTokensRequest(_Lenient):
    model: str = Field(min_length=1)
    messages: list[_InputMessage] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[_Tool] | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1)
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    stop_sequences: list[str] | None = None
    tool_choice: dict[str, Any] | None = None


def _bad(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request")


_Model = TypeVar("_Model", bound=BaseModel)


def _validated(model: type[_Model], raw: bytes) -> _Model:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise _bad(f"{where}: {first['msg']} (see https://docs.anthropic.com/en/api/messages)") from None


# -- requests -----------------------------------------------------------------------------------


def _translated(request: CountTokensRequest) -> tuple[list[Message], list[dict[str, Any]] | None]:
    """Chat messages and tools (backends/anthropic_format.py); a 400 naming what cannot be said."""
    try:
        messages = chat_messages(request.system, [m.model_dump() for m in request.messages])
        tools = chat_tools([t.model_dump(exclude_none=True) for t in request.tools or ()])
    except Unsupported as exc:
        raise _bad(f"{exc} (this router translates Messages to chat completions)") from None
    return messages, tools


def count_tokens(raw: bytes) -> int:
    """An estimate (about four characters a token, as the router's context check counts): the
    router has no tokenizer for every backend, and agents use this only to budget context."""
    messages, tools = _translated(_validated(CountTokensRequest, raw))
    text = orjson.dumps(messages) + orjson.dumps(tools or [])
    return max(1, len(text) // 4)


# -- answers ------------------------------------------------------------------------------------


def _tool_blocks(completion: Completion) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
             "name": call["function"]["name"], "input": tool_input(call["function"].get("arguments", ""))}
            for call in completion.tool_calls or ()]


def _usage(completion: Completion) -> dict[str, int]:
    return {"input_tokens": completion.usage.input_tokens, "output_tokens": completion.usage.output_tokens}


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps({"type": event, **data}) + b"\n\n"


class _Events:
    """One stream's events. Text goes out as it comes; tool calls arrive whole with the final
    completion, so each is one block with its input in one `input_json_delta`."""

    def __init__(self, model: str, input_estimate: int):
        self.model, self.input_estimate = model, input_estimate
        self.id = f"msg_{uuid.uuid4().hex[:24]}"
        self.blocks = 0
        self.text_open = False

    def start(self) -> bytes:
        message: dict[str, Any] = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": self.input_estimate, "output_tokens": 0}}
        return _sse("message_start", {"message": message})

    def text(self, text: str) -> bytes:
        head = b""
        if not self.text_open:
            self.text_open = True
            head = _sse("content_block_start", {"index": self.blocks, "content_block": {"type": "text", "text": ""}})
        return head + _sse("content_block_delta", {"index": self.blocks, "delta": {"type": "text_delta", "text": text}})

    def _close_text(self) -> list[bytes]:
        if not self.text_open:
            return []
        self.text_open = False
        self.blocks += 1
        return [_sse("content_block_stop", {"index": self.blocks - 1})]

    def finish(self, completion: Completion | None) -> bytes:
        out = self._close_text()
        if completion is not None:
            for block in _tool_blocks(completion):
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
                out += [_sse("content_block_start", {"index": self.blocks, "content_block": start}),
                        _sse("content_block_delta", {"index": self.blocks, "delta": delta}),
                        _sse("content_block_stop", {"index": self.blocks})]
                self.blocks += 1
        reason = stop_reason(completion) if completion is not None else "end_turn"
        usage = _usage(completion) if completion is not None else {"output_tokens": 0}
        out += [_sse("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": None}, "usage": usage}),
                _sse("message_stop", {})]
        return b"".join(out)

    def error(self, err: ApiError) -> bytes:
        return _sse("error", {"error": {"type": error_type(err.status), "message": err.message}})


class AnthropicDialect:
    """`POST /v1/messages` for TranslatedEndpoint."""

    def parse(self, raw: bytes) -> Translated:
        request = _validated(MessagesRequest, raw)
        messages, tools = _translated(request)
        extra: dict[str, Any] = {}
        if tools:
            extra["tools"] = tools
            try:
                choice = chat_tool_choice(request.tool_choice)
            except Unsupported as exc:
                raise _bad(str(exc)) from None
            if choice is not None:
                extra["tool_choice"] = choice
        if request.top_p is not None:
            extra["top_p"] = request.top_p
        estimate = max(1, len(orjson.dumps(messages)) // 4)
        return Translated(model=request.model, messages=messages, stream=request.stream,
                          max_tokens=request.max_tokens, temperature=request.temperature,
                          stop=request.stop_sequences or None, extra=extra, echo={"input_estimate": estimate})

    def error_body(self, err: ApiError) -> bytes:
        return orjson.dumps({"type": "error", "error": {"type": error_type(err.status), "message": err.message}})

    def body(self, call: Translated, completion: Completion) -> bytes:
        content: list[dict[str, Any]] = [{"type": "text", "text": completion.text}] if completion.text else []
        content += _tool_blocks(completion)
        return orjson.dumps({"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                             "model": call.model, "content": content, "stop_reason": stop_reason(completion),
                             "stop_sequence": None, "usage": _usage(completion)})

    def writer(self, call: Translated) -> _Events:
        return _Events(call.model, call.echo.get("input_estimate", 0))
