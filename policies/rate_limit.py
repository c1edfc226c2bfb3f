"""Rate limits as token buckets: requests per minute (`rpm`) and tokens per minute (`tpm`).

A bucket holds at most its per-minute limit and refills at limit/60 per second, so a full
bucket allows a burst of the whole minute's allowance and then one request (or token) every
60/limit seconds. A cost larger than the whole limit is capped at it: such a request waits for
a full bucket instead of never passing. `adjust` may drive a bucket below zero (a debt, paid
back by refilling), which is how real usage corrects an estimate charged at admission.

`Buckets` holds one key's rpm and tpm buckets and takes from both or from neither. The Redis
script in router/state/rate_limits.py is this arithmetic, line for line.

Pure: no I/O and no clock reads; every method takes `now` (seconds, any monotonic origin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Buckets", "Limited", "RateLimits", "TokenBucket", "request_cost"]

_EPSILON_S = 1e-9  # the Redis script uses the same


@dataclass(frozen=True, slots=True)
class RateLimits:
    """The configured limits of one backend or API key; None: that dimension is unlimited."""

    rpm: float | None = None
    tpm: float | None = None

    def __bool__(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    def dimensions(self) -> list[tuple[str, float]]:
        """("rpm", limit), ("tpm", limit): the dimensions that are limited, in that order."""
        return [(name, limit) for name, limit in (("rpm", self.rpm), ("tpm", self.tpm)) if limit is not None]


@dataclass(frozen=True, slots=True)
class Limited:
    """A refusal: which limit (`what`, e.g. "rpm 60") and seconds until the request would fit."""

    what: str
    free_in_s: float

    def describe(self) -> str:
        return f"at its rate limit ({self.what}), free in {self.free_in_s:.1f} s"

    @property
    def retry_after_s(self) -> int:
        """Whole seconds, rounded up (HTTP's Retry-After): waiting that long is always enough."""
        return max(1, math.ceil(self.free_in_s - 1e-9))


class TokenBucket:
    """One limit. Starts full at `now`."""

    __slots__ = ("limit", "level", "at")

    def __init__(self, limit: float, now: float, level: float | None = None):
        if limit <= 0:
            raise ValueError("a rate limit must be positive")
        self.limit = limit
        self.level = limit if level is None else level
        self.at = now  # when `level` was true

    @property
    def rate(self) -> float:
        """Refill, per second."""
        return self.limit / 60.0

    def level_at(self, now: float) -> float:
        if now <= self.at:  # a clock that went backwards refills nothing
            return self.level
        return min(self.limit, self.level + (now - self.at) * self.rate)

    def wait(self, cost: float, now: float) -> float:
        """Seconds until `cost` fits (0.0: now)."""
        wait = (min(cost, self.limit) - self.level_at(now)) / self.rate
        return wait if wait > _EPSILON_S else 0.0  # rounding must not refuse a request that fits

    def _refill(self, now: float) -> None:
        self.level = self.level_at(now)
        self.at = max(self.at, now)

    def take(self, cost: float, now: float) -> float:
        """Take `cost` if it fits now and return 0.0; else take nothing and return the wait."""
        wait = self.wait(cost, now)
        if wait == 0.0:
            self._refill(now)
            self.level -= min(cost, self.limit)
        return wait

    def adjust(self, delta: float, now: float) -> None:
        """Charge `delta` more (negative: give back), fit or not; the level may go below zero."""
        self._refill(now)
        self.level = min(self.limit, self.level - delta)


class Buckets:
    """One backend's (or key's) rpm and tpm buckets; a request takes from both or neither."""

    __slots__ = ("limits", "rpm", "tpm")

    def __init__(self, limits: RateLimits, now: float):
        self.limits = limits
        self.rpm = TokenBucket(limits.rpm, now) if limits.rpm is not None else None
        self.tpm = TokenBucket(limits.tpm, now) if limits.tpm is not None else None

    def _pairs(self, tokens: float) -> list[tuple[str, TokenBucket, float]]:
        pairs = []
        if self.rpm is not None:
            pairs.append(("rpm", self.rpm, 1.0))
        if self.tpm is not None:
            pairs.append(("tpm", self.tpm, float(tokens)))
        return pairs

    def peek(self, tokens: float, now: float) -> Limited | None:
        """What `take` would refuse, without taking: the longest wait among the limits."""
        worst: Limited | None = None
        for name, bucket, cost in self._pairs(tokens):
            wait = bucket.wait(cost, now)
            if wait > 0.0 and (worst is None or wait > worst.free_in_s):
                worst = Limited(f"{name} {bucket.limit:g}", wait)
        return worst

    def take(self, tokens: float, now: float) -> Limited | None:
        """One request of `tokens` (estimated) tokens: None when admitted (both taken), else
        why not (nothing taken)."""
        refused = self.peek(tokens, now)
        if refused is None:
            for _, bucket, cost in self._pairs(tokens):
                bucket.take(cost, now)
        return refused

    def correction(self, charged: float, used: float) -> float:
        """What tpm still owes once a request that was charged `charged` tokens at admission
        used `used` (negative: a refund)."""
        if self.tpm is None:
            return 0.0
        return used - min(charged, self.tpm.limit)

    def settle(self, charged: float, used: float, now: float) -> None:
        """Correct the tpm charge with the request's real usage."""
        delta = self.correction(charged, used)
        if self.tpm is not None and delta:
            self.tpm.adjust(delta, now)


def request_cost(input_tokens: int, max_tokens: int | None) -> int:
    """Tokens charged to tpm at admission: the input estimate plus the most the answer may take
    (just the input when `max_tokens` is unset; real usage corrects it afterwards)."""
    return max(0, input_tokens) + max(0, max_tokens or 0)
