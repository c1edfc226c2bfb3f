"""Validate a chat-completions request body into the Router's call arguments.

Plain checks on the decoded JSON rather than a pydantic model: this runs once per request on the
proxy's hot path, and the messages are handed to the backends untouched anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from router.server.wire import ApiError

__all__ = ["ChatCall", "parse_chat"]

# Sent on to the backend verbatim (Request.extra); anything else a client sends is ignored, so
# one editor's exotic field cannot make every backend answer 400.
_PASS_THROUGH = ("tools", "tool_choice", "parallel_tool_calls", "response_format", "seed", "top_p",
                 "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs")


@dataclass(slots=True)
class ChatCall:
    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tools(self) -> bool:
        return bool(self.extra.get("tools"))


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, code="invalid_request", param=param)


def parse_chat(raw: bytes) -> ChatCall:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _bad(f"the request body is not valid JSON ({exc}); send a chat-completions object") from None
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object with `model` and `messages`")
    model = body.get("model") or "auto"
    if not isinstance(model, str):
        raise _bad("`model` must be a string: `auto`, or a backend or consortium name from GET /v1/models", "model")
    call = ChatCall(model=model, messages=_messages(body.get("messages")))
    call.stream = bool(body.get("stream"))
    options = body.get("stream_options")
    call.include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    call.max_tokens = _max_tokens(body)
    call.temperature = _temperature(body.get("temperature"))
    call.stop = _stop(body.get("stop"))
    n = body.get("n")
    if n not in (None, 1):
        raise _bad("`n` > 1 is not supported; send one request per answer, or use a consortium model", "n")
    call.extra = {k: body[k] for k in _PASS_THROUGH if body.get(k) is not None}
    return call


def _messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise _bad("`messages` must be a non-empty list of {role, content} objects", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a string `role`", f"messages[{i}]")
    return messages


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(f"`max_tokens` must be a positive integer (got {value!r})", "max_tokens")
    return value


def _temperature(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2:
        raise _bad(f"`temperature` must be a number from 0 to 2 (got {value!r})", "temperature")
    return float(value)


def _stop(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value) and len(value) <= 4:
        return value or None
    raise _bad("`stop` must be a string or a list of up to 4 strings", "stop")
