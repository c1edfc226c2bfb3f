"""Requests an open breaker refused, logged as one record per client key per second.

A request refused by an open breaker costs no upstream call and answers at once, so clients
retrying without pause send thousands a second: one row each wrote 32,611 records and a 59 MB
SQLite file in 30 s (issue 47). The first such request of a second from a key is captured as any
other; the rest of that second only count into it, and the writer takes it once the second is
over (`Writer.put_after`), its decision saying how many requests it stands for
(`aggregate: {"requests": n, "second": unix second}`). A request that reached an upstream, or
was refused for anything else, is one record, as ever.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from backends.errors import BreakerOpen

__all__ = ["Aggregate", "BreakerRefusals", "refused_by_breaker"]


class _Captured(Protocol):
    """A queued record (router/store/request_log.py): its decision's extras, then its row."""

    extras: dict[str, Any]

    def row(self) -> tuple: ...


def refused_by_breaker(error: BaseException | None) -> bool:
    """Whether every candidate of a failed request was passed over by its open breaker, none called."""
    if error is None:
        return False
    errors = getattr(error, "exceptions", None) or (error,)
    return all(isinstance(e, BreakerOpen) for e in errors)


class Aggregate:
    """One key's refusals in one second: the first one's record, and how many there were."""

    __slots__ = ("_lock", "captured", "closed", "requests", "second")

    def __init__(self, captured: _Captured, second: int, lock: threading.Lock):
        self.captured = captured
        self.second = second
        self.requests = 1
        self.closed = False  # its row is made: a later refusal of its second starts another record
        self._lock = lock

    def row(self) -> tuple:
        with self._lock:
            self.closed = True
            requests = self.requests
        self.captured.extras["aggregate"] = {"requests": requests, "second": self.second}
        return self.captured.row()


class BreakerRefusals:
    """The open aggregate of each client key (its current second's)."""

    def __init__(self) -> None:
        self._open: dict[str | None, Aggregate] = {}
        self._lock = threading.Lock()

    def add(self, key: str | None, now: float, capture: Callable[[], _Captured]) -> Aggregate | None:
        """Count one refusal from `key` at `now` (unix seconds): None when it joined its second's
        record, else the new record (`capture` makes it) for the caller to queue."""
        second = int(now)
        with self._lock:
            current = self._open.get(key)
            if current is not None and current.second == second and not current.closed:
                current.requests += 1
                return None
            aggregate = self._open[key] = Aggregate(capture(), second, self._lock)
            return aggregate
