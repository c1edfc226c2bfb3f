"""Memory a burst of requests freed, handed back to the system once the burst is over.

glibc keeps what a process frees for its next allocations, and does not give back pages in the
middle of its heap on its own: after agents' 200 KB conversations, `route serve` stayed at 165 MiB
resident, of which malloc_trim returned 60. So once no request has finished for a second (or,
under steady load, every half minute) with requests served since the last trim, the heap is
trimmed in a thread (ctypes lets go of the GIL; a trim takes milliseconds). Elsewhere than glibc
there is no malloc_trim and nothing runs.
"""

from __future__ import annotations

import asyncio
import ctypes
import time
from collections.abc import Callable

__all__ = ["HeapTrim", "malloc_trim"]


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (macOS, musl)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library; no search, no subprocess
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapTrim:
    """Trims after bursts of finished requests (`run`); `served()` counts them so far (the
    server's, router/server/metrics.py `Served`), read once a quiet period."""

    def __init__(self, trim: Callable[[int], int] | None, served: Callable[[], int], *, quiet_s: float = 1.0,
                 busy_every_s: float = 30.0):
        self._trim = trim
        self._served = served
        self._quiet_s = quiet_s
        self._busy_every_s = busy_every_s
        self.trims = 0

    @property
    def served(self) -> int:
        return self._served()

    async def run(self) -> None:
        if self._trim is None:
            return
        seen = trimmed = self._served()
        trimmed_at = time.monotonic()
        while True:
            await asyncio.sleep(self._quiet_s)
            served = self._served()
            quiet = served == seen
            seen = served
            if served != trimmed and (quiet or time.monotonic() - trimmed_at >= self._busy_every_s):
                await asyncio.to_thread(self._trim, 0)
                self.trims += 1
                trimmed, trimmed_at = served, time.monotonic()
