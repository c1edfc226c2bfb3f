"""The OpenAI chat-completions wire format: SSE chunks, completion bodies, error bodies.

Chunks are assembled from pre-encoded byte templates around orjson-encoded values, because a
stream sends one per token and this is the proxy's hot path; the output is the exact JSON
OpenAI clients parse.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

import orjson

from backends.errors import (
    AllBackendsFailed,
    AtRateLimit,
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    DeadlineAtRisk,
    RateLimited,
    UsageError,
)
from backends.types import Completion

__all__ = ["ApiError", "ChunkWriter", "completion_body", "error_body", "error_for_failure"]

DONE = b"data: [DONE]\n\n"


class ApiError(Exception):
    """An error answered as `{"error": {"message", "type", "code"}}` with an HTTP status."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> bytes:
        return error_body(self.message, self.kind, self.code, self.param)


def error_body(message: str, kind: str, code: str | None = None, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}})


# (every failure is one of these types, status, error type, code), first match wins.
_STATUS_RULES = (
    ((BadRequest,), 400, "invalid_request_error", "upstream_bad_request"),  # the request's own fault
    ((AtRateLimit,), 429, "rate_limit_error", "rate_limit_exceeded"),  # this router's own rpm / tpm
    ((RateLimited,), 429, "rate_limit_error", "upstream_rate_limited"),
    ((BackendTimeout,), 504, "server_error", "upstream_timeout"),
    ((BackendUnavailable, BackendTimeout, RateLimited), 503, "server_error", "upstream_unavailable"),
)


def error_for_failure(exc: BaseException) -> ApiError:
    """Map a routing failure to a status: the request's fault 400, rate limits 429, timeouts 504,
    unreachable or failing backends 503, anything else from upstream 502."""
    errors = list(getattr(exc, "exceptions", None) or [exc])
    message = str(exc)
    if isinstance(exc, DeadlineAtRisk):
        return ApiError(504, message, kind="server_error", code="deadline_at_risk")
    if isinstance(exc, UsageError):  # the request itself, found wrong by the backend (a stream's first read)
        return ApiError(400, message, code="invalid_request")
    if isinstance(exc, BackendError | AllBackendsFailed):
        for types, status, kind, code in _STATUS_RULES:
            if all(isinstance(e, types) for e in errors):
                return ApiError(status, message, kind=kind, code=code,
                                headers=_retry_after(errors) if status == 429 else None)
        code = "upstream_auth_failed" if any(isinstance(e, AuthError) for e in errors) else "upstream_error"
        return ApiError(502, message, kind="server_error", code=code)
    return ApiError(500, f"internal error: {type(exc).__name__}", kind="server_error", code="internal_error")


def _retry_after(errors: list[BaseException]) -> dict[str, str] | None:
    waits = [e.retry_after for e in errors if isinstance(e, RateLimited) and e.retry_after is not None]
    # Whole seconds, rounded up: a client that waits exactly that long finds room.
    return {"retry-after": f"{max(1, math.ceil(min(waits) - 1e-9))}"} if waits else None


def new_id() -> str:
    # 96 random bits, like the 24 hex digits of a uuid4 before, without a getrandom syscall per
    # request: an id needs to be unique, not unguessable.
    return f"chatcmpl-{random.getrandbits(96):024x}"


class ChunkWriter:
    """Encodes one stream's `chat.completion.chunk` events."""

    __slots__ = ("_head", "_prefix", "_suffix")

    def __init__(self, model: str, completion_id: str | None = None, created: int | None = None):
        head = orjson.dumps({
            "id": completion_id or new_id(), "object": "chat.completion.chunk",
            "created": int(time.time()) if created is None else created, "model": model,
        })[:-1]  # without the closing brace: the choices follow
        self._head = b"data: " + head
        self._prefix = self._head + b',"choices":[{"index":0,"delta":{"content":'
        self._suffix = b'},"finish_reason":null}]}\n\n'

    def role(self) -> bytes:
        return self._head + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'

    def content(self, text: str) -> bytes:
        return self._prefix + orjson.dumps(text) + self._suffix

    def tool_calls(self, calls: list[dict[str, Any]]) -> bytes:
        indexed = [{"index": i, **call} for i, call in enumerate(calls)]
        delta = orjson.dumps({"tool_calls": indexed})
        return self._head + b',"choices":[{"index":0,"delta":' + delta + b',"finish_reason":null}]}\n\n'

    def finish(self, reason: str | None, route: dict[str, Any] | None = None) -> bytes:
        """The last choice event; `route` (our own facts, e.g. a degraded consortium) rides along."""
        extra = b',"route":' + orjson.dumps(route) if route else b""
        return (self._head + b',"choices":[{"index":0,"delta":{},"finish_reason":'
                + orjson.dumps(reason or "stop") + b"}]" + extra + b"}\n\n")

    def usage(self, completion: Completion) -> bytes:
        return self._head + b',"choices":[],"usage":' + orjson.dumps(_usage(completion)) + b"}\n\n"

    @staticmethod
    def error(err: ApiError) -> bytes:
        return b"data: " + err.body() + b"\n\n"


def route_facts(completion: Completion) -> dict[str, Any] | None:
    """What the router adds to an OpenAI response under `route`: a degraded consortium's losses."""
    lost = completion.metadata.get("degraded")
    return {"degraded": list(lost)} if lost else None


def degraded_header(completion: Completion) -> list[tuple[bytes, bytes]]:
    """`x-route-degraded: N; first loss` when a consortium answered with less than configured."""
    lost = completion.metadata.get("degraded")
    if not lost:
        return []
    value = f"{len(lost)}; {lost[0]}"[:300].encode("ascii", "replace")  # header values: plain ASCII
    return [(b"x-route-degraded", value)]


def completion_body(model: str, completion: Completion, route: dict[str, Any] | None = None) -> bytes:
    """The chat.completion object; `route` (e.g. a downgrade) rides along as an extra top-level
    field, which OpenAI clients keep (the SDK's `model_extra`)."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.tool_calls:
        message["tool_calls"] = completion.tool_calls
    body: dict[str, Any] = {
        "id": new_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": completion.finish_reason or "stop"}],
        "usage": _usage(completion),
    }
    if route:
        body["route"] = route
    return orjson.dumps(body)


def _usage(c: Completion) -> dict[str, int]:
    return {"prompt_tokens": c.usage.input_tokens, "completion_tokens": c.usage.output_tokens,
            "total_tokens": c.usage.total_tokens}
