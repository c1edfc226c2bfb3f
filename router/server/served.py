"""What `route serve` observes of the requests it serves: the metrics, the web view's live view,
each client key's token usage, and the count the heap trimmer waits on.

The endpoint hands each routed request a watch (`Served.watch`), which the router's request
scope calls with every upstream attempt made for it and with its outcome (router/decision.py
`Watch`). So the server registers nothing on the router it is given: a router shared with the
Python API, a test or a second app is counted by each app for the requests that app served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.decision import Attempt, Decision, Outcome
from router.server.keys import record_key_usage

if TYPE_CHECKING:
    from router.server.metrics import Metrics
    from router.server.ui.live import LiveView

__all__ = ["Served"]


class Served:
    """Built once per app, before its endpoint. `key_usage`: the server has per-key token limits,
    so each request's usage is charged to its key (router/server/keys.py)."""

    __slots__ = ("count", "key_usage", "live", "metrics")

    def __init__(self, metrics: Metrics, live: LiveView | None = None, *, key_usage: bool = False):
        self.metrics = metrics
        self.live = live
        self.key_usage = key_usage
        self.count = 0  # requests finished: the heap trimmer trims after bursts of them (heap_trim.py)

    def watch(self, protocol: str, key: str | None) -> _RequestWatch:
        """The watch of one request, which came in by `protocol` with the client key named `key`."""
        return _RequestWatch(self, protocol, key)


class _RequestWatch:
    __slots__ = ("key", "protocol", "served")

    def __init__(self, served: Served, protocol: str, key: str | None):
        self.served, self.protocol, self.key = served, protocol, key

    def attempt(self, attempt: Attempt, decision: Decision | None) -> None:
        served = self.served
        served.metrics.attempt(attempt, decision)
        if served.live is not None:
            served.live.attempt(attempt, decision)

    def refused(self, backend: str) -> None:
        self.served.metrics.refused("backend", backend)

    def finished(self, outcome: Outcome) -> None:
        served = self.served
        served.count += 1
        served.metrics.observe(outcome)
        if served.live is not None:
            served.live.observe(outcome, self.protocol, self.key)
        if served.key_usage:
            record_key_usage(outcome)
