"""Retry rules shared by every backend, on tenacity.

Retried: errors whose type says `retryable` (connect errors, timeouts, 429, 5xx, dropped
streams). Never retried: bad requests and auth errors. A 429's Retry-After is honoured. No
retry starts if its backoff would end past the request's deadline: the last error is raised
instead, so the caller can fall back while there is still time.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential, wait_random

from backends.errors import BackendError, RateLimited

__all__ = ["Deadline", "call_with_retries", "is_retryable"]

T = TypeVar("T")

# Retry-After values above this are treated as "not within this request" (some providers send
# minutes); the deadline check then stops the retry and the router falls back.
_MAX_RETRY_AFTER_S = 60.0


class Deadline:
    """An absolute point on the `time.monotonic` clock; None means no deadline."""

    __slots__ = ("at",)

    def __init__(self, timeout_s: float | None):
        self.at = None if timeout_s is None else time.monotonic() + timeout_s

    def remaining(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()

    def expired(self) -> bool:
        remaining = self.remaining()
        return remaining is not None and remaining <= 0


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.retryable


def _wait_policy(initial_s: float):
    # Exponential from `initial_s`, plus up to `initial_s` of jitter so clients don't retry in step.
    backoff = wait_exponential(multiplier=initial_s, max=8.0) + wait_random(0, initial_s)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), _MAX_RETRY_AFTER_S)
        return backoff(state)

    return wait


def _stop_policy(max_retries: int, deadline: Deadline):
    by_count = stop_after_attempt(max_retries + 1)

    def stop(state: RetryCallState) -> bool:
        if by_count(state):
            return True
        remaining = deadline.remaining()
        return remaining is not None and (state.upcoming_sleep or 0.0) >= remaining

    return stop


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    deadline: Deadline,
    backoff_initial_s: float = 0.25,
) -> T:
    """Run `attempt` until it succeeds, a non-retryable error occurs, retries run out, or the
    next backoff would overrun the deadline. The last error is re-raised unchanged."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=_wait_policy(backoff_initial_s),
        stop=_stop_policy(max_retries, deadline),
        reraise=True,
    )
    return await retrying(attempt)
