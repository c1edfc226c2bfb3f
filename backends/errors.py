"""The project's one exception tree.

    RouteError                      base of everything we raise on purpose
    ├── ConfigError                 bad config file or value (file, line); never retried
    ├── UsageError                  bad arguments from the caller; never retried
    │   └── Unsupported             no backend it may go to can take this request (tools, images, length)
    ├── BackendError                a backend failed; carries backend name and model
    │   ├── BackendTimeout          no answer within the deadline            (retryable)
    │   ├── RateLimited             HTTP 429; `retry_after` seconds or None  (retryable)
    │   │   └── AtRateLimit         skipped: its configured rpm/tpm is used up (never retried)
    │   ├── BackendUnavailable      5xx, dropped stream                      (retryable)
    │   │   ├── Unreachable         refused or unresolvable connection: fail over at once (not retried)
    │   │   ├── NotServed           404/405/410: nothing is served at the configured URL or model (not retried)
    │   │   └── BreakerOpen         skipped: its circuit breaker is open     (never retried)
    │   ├── MalformedResponse       the server answered something unparseable
    │   ├── BadRequest              the request's fault: a refused field or shape (never retried)
    │   └── AuthError               the credential's: missing key, HTTP 401/403 (never retried)
    ├── AllBackendsFailed           every candidate failed; also an ExceptionGroup of them
    │   └── RateLimitExceeded       ... every one at a rate limit; `retry_after_s`
    ├── DeadlineAtRisk              `on_deadline_risk: fail` and no backend at the prompt's quality
    │                               can meet the deadline: refused before any call
    └── CostLimitExceeded           a call's `max_cost_usd` would be passed: refused before any call
                                    (predicted cost), or before the next call of a consortium (running cost)

Third-party errors (httpx, litellm) are translated into these in one place per backend,
with ``raise ... from exc``; retry and fallback rules look only at these types. Which of them
is whose fault -- the request's, the credential's, the backend's, or pressure -- is each
class's `fault`; what an upstream's answer maps to is backends/faults.py, in one table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypedDict

__all__ = [
    "AllBackendsFailed",
    "AtRateLimit",
    "Where",
    "AuthError",
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "BadRequest",
    "BreakerOpen",
    "ConfigError",
    "CostLimitExceeded",
    "DeadlineAtRisk",
    "Fault",
    "MalformedResponse",
    "NotServed",
    "RateLimitExceeded",
    "RateLimited",
    "RouteError",
    "Unsupported",
    "Unreachable",
    "UsageError",
    "fault_of",
]

# Whose fault a failed call was (backends/faults.py has the table): only "backend" and
# "pressure" count against a backend (breaker, learned latency, retry budget).
Fault = Literal["request", "credential", "backend", "pressure"]


class Where(TypedDict):
    """The context every BackendError carries: `raise BackendTimeout("...", **backend.where())`."""

    backend: str
    model: str


class RouteError(Exception):
    """Base of every error this project raises on purpose."""

    exit_code = 1


class ConfigError(RouteError):
    """A config file or value is invalid. `path` and `line` say where, when known."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(f"{where}{message}")


class UsageError(RouteError):
    """The caller asked for something impossible (unknown model name, bad option)."""

    exit_code = 2


class Unsupported(UsageError):
    """The request needs what the named backend, or every candidate, lacks. `need` is tools,
    vision or context."""

    def __init__(self, message: str, *, need: str):
        self.need = need
        super().__init__(message)


class BackendError(RouteError):
    """A backend failed to answer. `retryable` tells retry and fallback code what to do;
    `fault` whose fault it was."""

    retryable = False
    fault: Fault = "backend"

    def __init__(
        self,
        message: str,
        *,
        backend: str = "",
        model: str = "",
        status: int | None = None,
        body: str | None = None,
    ):
        self.backend = backend
        self.model = model
        self.status = status
        self.body = body
        prefix = f"{backend}: " if backend else ""
        super().__init__(f"{prefix}{message}")


class BackendTimeout(BackendError):
    retryable = True


class RateLimited(BackendError):
    retryable = True
    fault: Fault = "pressure"

    def __init__(self, message: str, *, retry_after: float | None = None, backend: str = "", model: str = "",
                 status: int | None = None, body: str | None = None):
        self.retry_after = retry_after  # seconds, from the Retry-After header
        super().__init__(message, backend=backend, model=model, status=status, body=body)


class AtRateLimit(RateLimited):
    """Not called at all: the backend's configured `rpm` / `tpm` is used up (across every
    replica sharing the state). The next candidate is tried at once; waiting here would only
    spend the deadline, and the breaker hears nothing (the backend is not at fault)."""

    retryable = False


class BackendUnavailable(BackendError):
    retryable = True


class Unreachable(BackendUnavailable):
    """The connection never opened (refused, no route, name not resolved): nothing is listening
    there now, and a retry a few hundred milliseconds later finds the same. The router fails over
    at once; the breaker counts it, so later requests try it again only after its cooldown."""

    retryable = False


class NotServed(BackendUnavailable):
    """The upstream answered that it serves nothing at the configured URL or model (404, 405,
    410, naming no request field): the config's doing, the same for every request. Not retried;
    the breaker counts it, so the router stops calling it while other backends answer."""

    retryable = False


class BreakerOpen(BackendUnavailable):
    """Not called at all: the backend's breaker is open. Retrying before the cooldown is
    pointless; `retry_after` is the seconds until it ends (when known)."""

    retryable = False

    def __init__(self, message: str, *, retry_after: float | None = None, backend: str = "", model: str = ""):
        self.retry_after = retry_after
        super().__init__(message, backend=backend, model=model)


class MalformedResponse(BackendError):
    # A server that sent garbage once often sends it again, but a proxy hiccup can cause it too:
    # one retry is cheap and bounded by the deadline anyway.
    retryable = True


class BadRequest(BackendError):
    """The request's fault: an upstream (or this backend kind, writing it) refused a field or the
    request's shape -- an invalid value, context too long, content policy. `param` names the
    field when the upstream did; `code` is its reason in OpenAI's terms (`context_length_exceeded`,
    `content_policy_violation`, `invalid_request`)."""

    retryable = False
    fault: Fault = "request"

    def __init__(self, message: str, *, backend: str = "", model: str = "", status: int | None = None,
                 body: str | None = None, param: str | None = None, code: str | None = None):
        self.param = param
        self.code = code
        super().__init__(message, backend=backend, model=model, status=status, body=body)


class AuthError(BackendError):
    """The credential's fault: no key, or the upstream refused the one sent (401/403, no quota)."""

    retryable = False
    fault: Fault = "credential"


def fault_of(exc: BaseException) -> Fault | None:
    """Whose fault `exc` is, for a BackendError; None for anything else (a usage error, a bug, a
    cancellation), which is no evidence about the backend either."""
    return exc.fault if isinstance(exc, BackendError) else None


class AllBackendsFailed(RouteError, ExceptionGroup):
    """Every candidate backend failed. `.exceptions` holds one BackendError per attempt.
    `retry_after_s`: the soonest any candidate may be called again, when the router knows
    (0: now; `route serve` sends it as Retry-After)."""

    exit_code = 3
    retry_after_s: float | None = None

    def __new__(cls, message: str, errors: Sequence[Exception], *, retry_after_s: float | None = None):
        return super().__new__(cls, message, errors)

    def __init__(self, message: str, errors: Sequence[Exception], *, retry_after_s: float | None = None):
        super().__init__(message, errors)
        self.retry_after_s = retry_after_s

    def derive(self, excs):
        return AllBackendsFailed(self.message, list(excs), retry_after_s=self.retry_after_s)

    def __str__(self) -> str:
        lines = [self.message]
        lines += [f"  - {type(e).__name__}: {e}" for e in self.exceptions]
        return "\n".join(lines)


class RateLimitExceeded(AllBackendsFailed):
    """Every candidate was at a rate limit (ours or the provider's 429): nothing answered.
    `retry_after_s`: seconds until the soonest is free again (None when no provider said)."""

    def __new__(cls, message: str, errors: Sequence[Exception], *, retry_after_s: float | None = None):
        return super().__new__(cls, message, errors)

    def __init__(self, message: str, errors: Sequence[Exception], *, retry_after_s: float | None = None):
        super().__init__(message, errors, retry_after_s=retry_after_s)

    def derive(self, excs):
        return RateLimitExceeded(self.message, list(excs), retry_after_s=self.retry_after_s)

    def __str__(self) -> str:
        # One paragraph: what is limited and when it frees up, then what to do.
        reasons = "; ".join(str(e) for e in self.exceptions)
        wait = f"try again in {math.ceil(self.retry_after_s)} s" if self.retry_after_s is not None else "try again later"
        return (f"{self.message}: {reasons}. Nothing was answered; {wait}, or raise the backends' rpm / tpm in the "
                "config (or add a backend to the tier).")


class DeadlineAtRisk(RouteError):
    """No backend of the prompt's tier (or a stronger one) is predicted to answer within the
    deadline, and the tier's `on_deadline_risk` is `fail`: nothing was called, a weaker tier
    least of all. `tier` and `deadline_s` say which."""

    exit_code = 3

    def __init__(self, message: str, *, tier: str | None = None, deadline_s: float | None = None):
        self.tier = tier
        self.deadline_s = deadline_s
        super().__init__(message)


class CostLimitExceeded(RouteError):
    """A call's `max_cost_usd` would be passed. Raised before the first model call when every
    candidate is predicted to cost more, or during a consortium before a call that the running
    cost leaves no room for (what was spent stays spent). `limit_usd` and `spent_usd` say how much."""

    exit_code = 3

    def __init__(self, message: str, *, limit_usd: float, spent_usd: float = 0.0):
        self.limit_usd = limit_usd
        self.spent_usd = spent_usd
        super().__init__(message)
