"""Ctrl-C for the sync wrappers (`Router.complete`, `Router.stream`): cancel, don't explode.

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to be,
which inside an event loop means in the middle of some task's step: a member call, an httpx read,
a `finally` that was cleaning up. That task dies or misreads it (a member "timed out"), the others
are left pending, and closing the loop afterwards finds async generators still running
(`aclose(): asynchronous generator is already running`). asyncio.Runner solves this for
`asyncio.run`; this does the same for one awaitable on our own loop: the first Ctrl-C cancels the
task (so every call under it is cancelled and logged as such) and KeyboardInterrupt is raised once
it has unwound; a second Ctrl-C interrupts at once.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["run_interruptibly"]

T = TypeVar("T")


async def _wait(awaitable: Awaitable[T]) -> T:
    return await awaitable


def run_interruptibly(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
    """`loop.run_until_complete(awaitable)`, with Ctrl-C turned into cancelling it first."""
    task = loop.create_task(_wait(awaitable))
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return loop.run_until_complete(task)  # someone else owns SIGINT: leave it to them
    interrupted = False

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if interrupted or task.done():
            raise KeyboardInterrupt()
        interrupted = True
        loop.call_soon_threadsafe(task.cancel)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt() from None
        raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
