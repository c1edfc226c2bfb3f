"""The server's errors: `ApiError` (a status and an OpenAI-shaped body; each protocol dialect
writes it in its own shape), and the one rule that maps a routing failure to a status.
"""

from __future__ import annotations

import math

import orjson

from backends.errors import (
    AllBackendsFailed,
    AtRateLimit,
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    BreakerOpen,
    ConfigError,
    CostLimitExceeded,
    DeadlineAtRisk,
    RateLimited,
    Unsupported,
    UsageError,
)

__all__ = ["ApiError", "error_body", "error_for_failure", "internal_error", "usage_error"]


class ApiError(Exception):
    """An error answered with an HTTP status; `body()` is OpenAI's `{"error": {...}}`."""

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
_NEED_PARAMS = {"tools": "tools", "vision": "messages", "context": "messages", "output": "max_tokens"}


def error_for_failure(exc: BaseException) -> ApiError:
    """Map a routing failure to a status: the request's fault (its own cost limit too) 400, rate
    limits 429, timeouts 504, unreachable or failing backends 503, anything else from upstream 502."""
    errors = list(getattr(exc, "exceptions", None) or [exc])
    message = str(exc)
    if isinstance(exc, DeadlineAtRisk):
        return ApiError(504, message, kind="server_error", code="deadline_at_risk")
    if isinstance(exc, UsageError):  # the request itself, found wrong by the router or a backend
        return usage_error(exc)
    if isinstance(exc, ConfigError):  # what the request names cannot be built from the config
        return ApiError(400, message, code="invalid_request")
    if isinstance(exc, CostLimitExceeded):  # the request's own max_cost_usd leaves no candidate
        return ApiError(400, message, code="cost_limit_exceeded", param="max_cost_usd")
    if isinstance(exc, BackendError | AllBackendsFailed):
        for types, status, kind, code in _STATUS_RULES:
            if all(isinstance(e, types) for e in errors):
                return ApiError(status, message, kind=kind, code=code, headers=_retry_after(errors))
        code = "upstream_auth_failed" if any(isinstance(e, AuthError) for e in errors) else "upstream_error"
        return ApiError(502, message, kind="server_error", code=code)
    return internal_error(exc)


def usage_error(exc: UsageError) -> ApiError:
    """A 400 for what the caller asked: for a request no backend can take, which need and where."""
    if isinstance(exc, Unsupported):
        code = "max_tokens_too_large" if exc.need == "output" else f"{exc.need}_not_supported"
        return ApiError(400, str(exc), code=code, param=_NEED_PARAMS.get(exc.need))
    return ApiError(400, str(exc), code="invalid_request")


def internal_error(exc: BaseException) -> ApiError:
    # A bug must still answer in the API's shape (clients parse it), and say no more than its type.
    return ApiError(500, f"internal error: {type(exc).__name__}", kind="server_error", code="internal_error")


def _retry_after(errors: list[BaseException]) -> dict[str, str] | None:
    """`Retry-After` when every failure says when to come back: a rate limit's wait, an open
    breaker's cooldown (so a retrying client waits for the probe instead of hammering)."""
    waits = [e.retry_after for e in errors if isinstance(e, RateLimited | BreakerOpen) and e.retry_after is not None]
    # Whole seconds, rounded up: a client that waits exactly that long finds room.
    return {"retry-after": f"{max(1, math.ceil(min(waits) - 1e-9))}"} if waits else None
