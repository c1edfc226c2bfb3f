"""The one deadline type: an absolute point on the `time.monotonic` clock.

Every layer that limits time -- a routed request, a consortium run, one backend attempt -- holds a
Deadline and narrows it with `within()`, so nested limits never add up past the outermost one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TypeVar

__all__ = ["Deadline", "Watchdog"]

T = TypeVar("T")


class Deadline:
    """None as `at` means no deadline."""

    __slots__ = ("at",)

    def __init__(self, timeout_s: float | None = None, *, at: float | None = None):
        if at is not None:
            self.at: float | None = at
        else:
            self.at = None if timeout_s is None else time.monotonic() + timeout_s

    def remaining(self) -> float | None:
        """Seconds left (negative once passed), or None without a deadline."""
        return None if self.at is None else self.at - time.monotonic()

    def expired(self) -> bool:
        remaining = self.remaining()
        return remaining is not None and remaining <= 0

    def within(self, timeout_s: float | None) -> Deadline:
        """The earlier of this deadline and `timeout_s` from now."""
        if timeout_s is None:
            return Deadline(at=self.at)
        other = time.monotonic() + timeout_s
        return Deadline(at=other if self.at is None else min(self.at, other))

    def __repr__(self) -> str:
        remaining = self.remaining()
        return "Deadline(none)" if remaining is None else f"Deadline({remaining:.3f}s left)"


class Watchdog:
    """A deadline over a whole stream with one timer, where `asyncio.timeout` around each chunk
    would arm and cancel one per chunk (about 6 us each on CPython 3.11: more than the rest of
    a chunk's way through the router). The timer cancels the task only while it waits in
    `next`, and that wait raises TimeoutError; a deadline that passes between waits (while the
    caller writes to its client) is raised by the next wait. `stop()` when the stream ends.

    The cut comes one turn of the event loop after the timer: an answer that arrived by the
    time the timer ran (a busy box runs the loop late, and then hands it both at once) is
    taken, not thrown away."""

    __slots__ = ("_cancelling", "_fired", "_handle", "_ours", "_task")

    def __init__(self, deadline: Deadline):
        self._fired = self._ours = False
        self._task: asyncio.Task | None = None  # the task waiting now, if any
        self._cancelling = 0  # its cancellations pending when it began to wait
        remaining = deadline.remaining()
        self._handle: asyncio.Handle | None = (
            None if remaining is None else asyncio.get_running_loop().call_later(max(0.0, remaining), self._due))

    def _due(self) -> None:
        # Callbacks already queued -- the wake-up of a task whose answer arrived -- run first.
        self._handle = asyncio.get_running_loop().call_soon(self._fire)

    def _fire(self) -> None:
        self._fired = True
        if self._task is not None:
            self._ours = True
            self._task.cancel()

    async def next(self, items: AsyncIterator[T]) -> T | None:
        """The next item of `items` (None at its end), or TimeoutError once the deadline passed."""
        with self:
            return await anext(items, None)

    def __enter__(self) -> None:
        """`with watchdog: item = await ...`: the wait inside is cut at the deadline, as `next`'s
        is, with the awaited call made by the caller itself (no frame of this module between a
        caller and what it awaits)."""
        if self._fired:
            raise TimeoutError
        task = asyncio.current_task()
        assert task is not None
        self._cancelling = task.cancelling()
        self._task = task

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        task, self._task = self._task, None
        # Ours alone: a timeout. Anyone else's as well (a client gone): a cancellation.
        if (kind is not None and issubclass(kind, asyncio.CancelledError) and self._ours and task is not None
                and task.uncancel() <= self._cancelling):
            raise TimeoutError from None

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
