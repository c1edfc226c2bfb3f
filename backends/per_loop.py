"""One object per running event loop: asyncio clients and semaphores are bound to the loop they
first ran on, and the sync API, the servers and tests each run loops of their own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerLoop"]

T = TypeVar("T")


class PerLoop(Generic[T]):
    """`get()` returns this loop's object, made by `factory` on first use; entries of closed
    loops are dropped as new ones are made."""

    def __init__(self, factory: Callable[[], T]):
        self._factory = factory
        self.by_loop: dict[asyncio.AbstractEventLoop, T] = {}

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        value = self.by_loop.get(loop)
        if value is None:
            for stale in [lp for lp in self.by_loop if lp.is_closed()]:
                del self.by_loop[stale]
            value = self.by_loop[loop] = self._factory()
        return value
