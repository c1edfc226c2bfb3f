"""Turn a chat-completions request body into the Router's call arguments, or a 400.

The body is checked against router/server/protocol.py (the API's schema) after a depth check
on the decoded JSON; a refusal names the field (`param`) and says what was expected. The
messages then go to the backends as the client sent them (validated, not rebuilt).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from router.server.protocol import (
    MAX_DEPTH,
    ChatCompletionRequest,
    ValidationError,
    depth_exceeds,
    validate_chat,
)
from router.server.wire import ApiError

__all__ = ["ChatCall", "parse_chat"]

# Sent on to the backend verbatim (Request.extra); other top-level fields are validated, then
# not sent on: one editor's exotic option must not make every backend answer 400.
_PASS_THROUGH = ("tools", "tool_choice", "parallel_tool_calls", "response_format", "seed", "top_p",
                 "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs")
_SHOWN_INPUT = 80  # characters of a refused value quoted back


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
    # Each level takes an opening bracket: a body with few cannot be deep, so skip the walk.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and depth_exceeds(body):
        raise _bad(f"the request body nests objects and arrays more than {MAX_DEPTH} levels deep; "
                   "no chat-completions field needs that")
    try:
        request = validate_chat(body)
    except ValidationError as exc:
        raise _refusal(exc) from None
    if request.n not in (None, 1):
        raise _bad("`n` > 1 is not supported; send one request per answer, or use a consortium model", "n")
    return _call(request, body)


def _call(request: ChatCompletionRequest, body: dict[str, Any]) -> ChatCall:
    stop = [request.stop] if isinstance(request.stop, str) else request.stop
    return ChatCall(
        model=request.model,
        messages=body["messages"],
        stream=bool(request.stream),
        include_usage=bool(request.stream_options and request.stream_options.include_usage),
        max_tokens=request.max_completion_tokens or request.max_tokens,
        temperature=request.temperature,
        stop=stop or None,
        extra={k: body[k] for k in _PASS_THROUGH if body.get(k) is not None},
    )


# -- refusals ---------------------------------------------------------------------------------

_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none"})
_TAGGED_LISTS = frozenset({"messages", "content"})  # lists of unions told apart by role / type


def _is_union_tag(loc: tuple[Any, ...], i: int) -> bool:
    """Location parts pydantic adds for union members and discriminator tags: not field names."""
    part = loc[i]
    if not isinstance(part, str) or i == 0:
        return False
    if part in _TYPE_TAGS or part.startswith(("list[", "dict[", "literal[", "function-")) or part[:1].isupper():
        return True
    if loc[i - 1] == "response_format":
        return True
    return isinstance(loc[i - 1], int) and i >= 2 and (loc[i - 2] in _TAGGED_LISTS or str(loc[i - 2]).startswith("list["))


def _param(loc: tuple[Any, ...]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if not _is_union_tag(loc, i):
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _refusal(exc: ValidationError) -> ApiError:
    """One 400 naming the most specific bad field (a list of parts that fails inside says
    which part, not just "not a string"), with every reason pydantic gave for it (a union field
    fails once per alternative)."""
    errors = exc.errors(include_url=False)
    first = max(errors, key=lambda e: len(e["loc"]))  # max keeps the first of equals
    param = _param(first["loc"])
    reasons = dict.fromkeys(e["msg"] for e in errors if _param(e["loc"]) == param)
    got = "" if first["type"] == "missing" else f" (got {_shown(first.get('input'))})"
    text = "; or ".join(r[0].lower() + r[1:] for r in reasons)
    return _bad(f"`{param or 'body'}`: {text}{got}{_others(errors, param)}. See the OpenAI chat-completions "
                "reference for its shape.", param or None)


def _others(errors: list[Any], param: str) -> str:
    # Other alternatives of the same union fail at a prefix of `param`: not other fields.
    more = len({p for p in (_param(e["loc"]) for e in errors) if not param.startswith(p)})
    return f"; {more} other field{'s' if more > 1 else ''} also invalid" if more else ""


def _shown(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= _SHOWN_INPUT else text[:_SHOWN_INPUT] + "…"
