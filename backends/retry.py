"""The one retry policy; the router's call path (router/calls.py) is its only user.

Retried: errors whose type says `retryable` (connect errors, timeouts, 429, 5xx, dropped
streams), each class up to its own limit (`routing.retries`, like LiteLLM's retry policy).
Never retried: bad requests, auth errors, a spent budget. A 429's Retry-After is honoured. No
retry starts if its backoff would end past the deadline: the last error is raised instead, so
the caller can fall back while there is still time.

The loop is written out rather than run by tenacity: it is the same policy (tenacity's
exponential backoff plus jitter), but every call paid for building a retrying object and
stepping its state machine (8% of `route serve`'s CPU per request, py-spy, issue 13) although
nearly every call succeeds at once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from backends.deadline import Deadline
from backends.errors import BackendError, RateLimited

__all__ = ["RetryPolicy", "call_with_retries", "is_retryable"]

T = TypeVar("T")

# Retry-After values above this are treated as "not within this request" (some providers send
# minutes); the deadline check then stops the retry and the router falls back.
_MAX_RETRY_AFTER_S = 60.0


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


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.retryable


_MAX_BACKOFF_S = 8.0


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


async def call_with_retries(attempt: Callable[[], Awaitable[T]], *, policy: RetryPolicy, deadline: Deadline) -> T:
    """Run `attempt` until it succeeds, a non-retryable error occurs, the error's class runs out
    of retries, or the next backoff would overrun the deadline. The last error is re-raised."""
    retries = 0
    while True:
        try:
            return await attempt()
        except BaseException as exc:  # a cancellation is not retryable: re-raised as it is
            if not policy.allows(exc, retries):
                raise
            wait = backoff_s(exc, retries + 1, policy.backoff_initial_s)
            remaining = deadline.remaining()
            if remaining is not None and wait >= remaining:
                raise
        await asyncio.sleep(wait)
        retries += 1
