"""The one retry policy, and its budget across requests. Pure: the router's call path
(router/calls.py) runs the loop, asking this policy after each failure whether to retry and
how long to wait first.

Retried: errors whose type says `retryable` (connect errors, timeouts, 429, 5xx, dropped
streams), each class up to its own limit (`routing.retries`, like LiteLLM's retry policy).
Never retried: bad requests, auth errors, a spent budget. A 429's Retry-After is honoured. No
retry starts if its backoff would end past the deadline: the last error is raised instead, so
the caller can fall back while there is still time.

The policy is written out rather than run by tenacity: it is the same policy (tenacity's
exponential backoff plus jitter), but every call paid for building a retrying object and
stepping its state machine (8% of `route serve`'s CPU per request, py-spy, issue 13) although
nearly every call succeeds at once.

Retries that add up: a budget across requests, per backend, as gRPC throttles retries. Each
backend has a bucket that starts full (`max_tokens`). Every failed attempt takes a token; every
success puts back `token_ratio` of one. A retry may start only while the bucket is more than
half full. So against an upstream that fails everything, retries stop after about
max_tokens / 2 failures, however many clients retry at once, and start again only as
successes refill the bucket; against a healthy one a failure now and then is still retried.
(Envoy's retry budget and gRPC's retryThrottling work the same way.) Single-threaded: the call
path owns one, on its event loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from backends.errors import BackendError, RateLimited

__all__ = ["RetryBudget", "RetryBudgetSettings", "RetryPolicy", "backoff_s", "is_retryable"]

# Retry-After values above this are treated as "not within this request" (some providers send
# minutes); the deadline check then stops the retry and the router falls back.
_MAX_RETRY_AFTER_S = 60.0
_MAX_BACKOFF_S = 8.0


@dataclass()
class RetryPolicy:
    """`max_retries` for every retryable error, unless `per_class` (error class name -> retries,
    e.g. {"RateLimited": 4, "BackendTimeout": 0}) says otherwise for that class. `budget`, when
    given, is asked before each retry: retries across requests are limited too."""

    max_retries: int = 2
    backoff_initial_s: float = 0.25
    per_class: Mapping[str, int] = field(default_factory=dict)
    budget: Callable[[], bool] | None = None

    def allows(self, error: BaseException, retries_so_far: int) -> bool:
        if not is_retryable(error):
            return False
        limit = self.per_class.get(type(error).__name__, self.max_retries)
        return retries_so_far < limit and (self.budget is None or self.budget())

    def wait_before_retry(self, error: BaseException, retries_so_far: int, remaining_s: float | None) -> float | None:
        """Seconds to wait before retrying after `error`, or None: raise it (not retryable, its
        class out of retries, the budget spent, or the backoff would overrun the `remaining_s`
        the deadline leaves; None: no deadline)."""
        if not self.allows(error, retries_so_far):
            return None
        wait = backoff_s(error, retries_so_far + 1, self.backoff_initial_s)
        return None if remaining_s is not None and wait >= remaining_s else wait


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.retryable


def backoff_s(error: BaseException, attempt: int, initial_s: float) -> float:
    """Seconds to wait after failed attempt number `attempt` (1 = the first): a 429's
    Retry-After, else exponential from `initial_s` (at most _MAX_BACKOFF_S) plus up to
    `initial_s` of jitter, so clients don't retry in step."""
    if isinstance(error, RateLimited) and error.retry_after is not None:
        return min(max(error.retry_after, 0.0), _MAX_RETRY_AFTER_S)
    try:
        exponential = min(initial_s * 2 ** (attempt - 1), _MAX_BACKOFF_S)
    except OverflowError:
        exponential = _MAX_BACKOFF_S
    return max(0.0, exponential) + random.random() * initial_s


# -- the budget across requests -------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RetryBudgetSettings:
    max_tokens: float = 10.0
    token_ratio: float = 0.1


class RetryBudget:
    """One bucket per backend name."""

    def __init__(self, settings: RetryBudgetSettings | None = None):
        self.settings = settings or RetryBudgetSettings()
        self._tokens: dict[str, float] = {}

    def tokens(self, name: str) -> float:
        return self._tokens.get(name, self.settings.max_tokens)

    def record(self, name: str, *, ok: bool) -> None:
        """An attempt's outcome: a success refills a little, a failure takes a token."""
        change = self.settings.token_ratio if ok else -1.0
        self._tokens[name] = min(self.settings.max_tokens, max(0.0, self.tokens(name) + change))

    def allows_retry(self, name: str) -> bool:
        return self.tokens(name) > self.settings.max_tokens / 2
