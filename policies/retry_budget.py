"""Retries that add up: a budget across requests, per backend, as gRPC throttles retries.

Each backend has a bucket that starts full (`max_tokens`). Every failed attempt takes a token;
every success puts back `token_ratio` of one. A retry may start only while the bucket is more
than half full. So against an upstream that fails everything, retries stop after about
max_tokens / 2 failures, however many clients retry at once, and start again only as
successes refill the bucket; against a healthy one a failure now and then is still retried.
(Envoy's retry budget and gRPC's retryThrottling work the same way.)

Pure and single-threaded: the router's call path owns one, on its event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RetryBudget", "RetryBudgetSettings"]


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
