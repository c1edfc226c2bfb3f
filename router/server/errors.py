"""The server's errors: `ApiError` (a status and an OpenAI-shaped body; each protocol dialect
writes it in its own shape), and the one rule that maps a routing failure to a status.

Whose fault a failure was (backends/faults.py) decides first: the request's is a 400 naming the
field, whatever else failed beside it (the client can fix it; a retry cannot).

Every 503 says when to ask again, as the router knows it: the soonest any candidate may be
called (with every breaker open, the next last-resort probe: 1 s after the breaker opened,
doubling per failed probe to `routing.breaker.probe_max_ms`, policies/breaker.py), and never
sooner than MIN_RETRY_AFTER_S. A "0" invited a storm: a client obeying it sent thousands of
requests a second against a dead upstream, and spent its own retries in a few seconds (Codex gave
up after 2.8 s through route against 26 s of its own backoff direct), so an outage it survives
direct failed its task through route. The probes keep a dead upstream to one call per probe
whatever clients do. `Retry-After` is whole seconds, rounded up (a client that waits it finds the
probe due); `retry-after-ms` (OpenAI's and Anthropic's SDKs and the AI SDK read it first) is the
same wait in milliseconds.
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

__all__ = ["ASK_AGAIN_S", "MIN_RETRY_AFTER_S", "ApiError", "error_body", "error_for_failure", "internal_error", "refused_request", "usage_error"]


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
# (The request's fault comes before these: `refused_request`.)
_STATUS_RULES = (
    ((AtRateLimit,), 429, "rate_limit_error", "rate_limit_exceeded"),  # this router's own rpm / tpm
    ((RateLimited,), 429, "rate_limit_error", "upstream_rate_limited"),
    ((BackendTimeout,), 504, "server_error", "upstream_timeout"),
    ((BackendUnavailable, BackendTimeout, RateLimited), 503, "server_error", "upstream_unavailable"),
)
_NEED_PARAMS = {"tools": "tools", "vision": "messages", "context": "messages", "output": "max_tokens"}


def error_for_failure(exc: BaseException) -> ApiError:
    """Map a routing failure to a status: the request's fault (its own cost limit too) 400, rate
    limits 429, timeouts 504, unreachable or failing backends 503 (with Retry-After), anything else
    from upstream 502."""
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
        refused = next((e for e in errors if isinstance(e, BadRequest)), None)
        if refused is not None:
            return refused_request(refused)
        for types, status, kind, code in _STATUS_RULES:
            if all(isinstance(e, types) for e in errors):
                headers = _retry_after(errors, getattr(exc, "retry_after_s", None), status)
                return ApiError(status, message, kind=kind, code=code, headers=headers)
        code = "upstream_auth_failed" if any(isinstance(e, AuthError) for e in errors) else "upstream_error"
        return ApiError(502, message, kind="server_error", code=code)
    return internal_error(exc)


def refused_request(error: BadRequest) -> ApiError:
    """The request's fault, as the upstream (or the backend kind writing it) said it: a 400 naming
    the field when it was named, with the upstream's reason as its code (context_length_exceeded
    lets a client compact and resend)."""
    named = f" (the field: {error.param})" if error.param and error.param not in str(error) else ""
    return ApiError(400, f"{error}{named}. The request was not retried: fix it and send it again.",
                    code=error.code or "invalid_request", param=error.param)


def usage_error(exc: UsageError) -> ApiError:
    """A 400 for what the caller asked: for a request no backend can take, which need and where."""
    if isinstance(exc, Unsupported):
        code = "max_tokens_too_large" if exc.need == "output" else f"{exc.need}_not_supported"
        return ApiError(400, str(exc), code=code, param=_NEED_PARAMS.get(exc.need))
    return ApiError(400, str(exc), code="invalid_request")


def internal_error(exc: BaseException) -> ApiError:
    # A bug must still answer in the API's shape (clients parse it), and say no more than its type.
    return ApiError(500, f"internal error: {type(exc).__name__}", kind="server_error", code="internal_error")


# A 503's wait (seconds) when nothing the router knows says when (a full connection table).
ASK_AGAIN_S = 1.0
# The shortest wait a 503 asks for (seconds): a client obeying a shorter one retries in a loop.
MIN_RETRY_AFTER_S = 1.0


def _retry_after(errors: list[BaseException], soonest_s: float | None, status: int) -> dict[str, str] | None:
    """When to come back. A 429: the rate limits' wait, whole seconds rounded up (a client that
    waits exactly that long finds room), when they said. A 503, always (the module docstring):
    the soonest any candidate may be called again, as the router worked it out (`soonest_s`),
    else what the failures say, else ASK_AGAIN_S."""
    waits = [e.retry_after for e in errors if isinstance(e, RateLimited | BreakerOpen) and e.retry_after is not None]
    if status == 429:
        return {"retry-after": f"{max(1, math.ceil(min(waits) - 1e-9))}"} if waits else None
    if status != 503:
        return None
    known = soonest_s if soonest_s is not None else (min(waits) if waits else ASK_AGAIN_S)
    wait = max(MIN_RETRY_AFTER_S, known)
    return {"retry-after": f"{math.ceil(wait - 1e-9)}", "retry-after-ms": f"{math.ceil(wait * 1000 - 1e-6)}"}
