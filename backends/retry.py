"""The one retry policy, on tenacity; the router's call path (router/calls.py) is its only user.

Retried: errors whose type says `retryable` (connect errors, timeouts, 429, 5xx, dropped
streams), each class up to its own limit (`routing.retries`, like LiteLLM's retry policy).
Never retried: bad requests, auth errors, a spent budget. A 429's Retry-After is honoured. No
retry starts if its backoff would end past the deadline: the last error is raised instead, so
the caller can fall back while there is still time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception
from tenacity.wait import wait_exponential, wait_random

from backends.deadline import Deadline
from backends.errors import BackendError, RateLimited

__all__ = ["RetryPolicy", "call_with_retries", "is_retryable"]

T = TypeVar("T")

# Retry-After values above this are treated as "not within this request" (some providers send
# minutes); the deadline check then stops the retry and the router falls back.
_MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` for every retryable error, unless `per_class` (error class name -> retries,
    e.g. {"RateLimited": 4, "BackendTimeout": 0}) says otherwise for that class."""

    max_retries: int = 2
    backoff_initial_s: float = 0.25
    per_class: Mapping[str, int] = field(default_factory=dict)

    def allows(self, error: BaseException, retries_so_far: int) -> bool:
        if not is_retryable(error):
            return False
        limit = self.per_class.get(type(error).__name__, self.max_retries)
        return retries_so_far < limit


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.retryable


def _wait_policy(initial_s: float) -> Callable[[RetryCallState], float]:
    # Exponential from `initial_s`, plus up to `initial_s` of jitter so clients don't retry in step.
    backoff = wait_exponential(multiplier=initial_s, max=8.0) + wait_random(0, initial_s)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), _MAX_RETRY_AFTER_S)
        return float(backoff(state))

    return wait


def _stop_policy(policy: RetryPolicy, deadline: Deadline) -> Callable[[RetryCallState], bool]:
    def stop(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if exc is None or not policy.allows(exc, state.attempt_number - 1):
            return True
        remaining = deadline.remaining()
        return remaining is not None and (state.upcoming_sleep or 0.0) >= remaining

    return stop


async def call_with_retries(attempt: Callable[[], Awaitable[T]], *, policy: RetryPolicy, deadline: Deadline) -> T:
    """Run `attempt` until it succeeds, a non-retryable error occurs, the error's class runs out
    of retries, or the next backoff would overrun the deadline. The last error is re-raised."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=_wait_policy(policy.backoff_initial_s),
        stop=_stop_policy(policy, deadline),
        reraise=True,
    )

    async def run() -> T:  # tenacity awaits only what a coroutine function returns
        return await attempt()

    return await retrying(run)
