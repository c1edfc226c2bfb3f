"""Waiting for what another thread or process does, without sleeping a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["LATE_S", "eventually"]

# How late a deadline's cut may come on a loaded machine and still count as the deadline's
# doing. Every test that uses it cuts a fault that would otherwise last 10 s or forever, so the
# bound says "cut, not waited out" without timing how fast this machine happens to be.
LATE_S = 5.0


def eventually(predicate: Callable[[], object], timeout_s: float = 30.0) -> bool:
    """Whether `predicate()` came true, polled every 10 ms. The limit only ends a failing test:
    a passing one returns as soon as it holds, so the limit is generous, not a timing margin."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
