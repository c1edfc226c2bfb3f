"""Waiting for what another thread or process does, without sleeping a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["eventually"]


def eventually(predicate: Callable[[], object], timeout_s: float = 30.0) -> bool:
    """Whether `predicate()` came true, polled every 10 ms. The limit only ends a failing test:
    a passing one returns as soon as it holds, so the limit is generous, not a timing margin."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
