"""The slow part of the page: figures read from the request log (every process and replica that
writes to it, not just this one) and the learning panel (files on disk). Both block, so they are
built on a worker thread, at most every `every_s` seconds however many pages poll, and only
while some page does.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from router.server.ui.learning import learning_panel
from router.store.stats import summarize

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["SlowPanels", "log_hour"]

_HOUR_S = 3600.0


def log_hour(router: RouterService) -> dict[str, Any] | None:
    """Per backend over the last hour, from the request log: requests, errors, spend. None
    without a log. Blocking."""
    if router.view.request_log is None:
        return None
    from router.store.choice import open_log

    router.view.request_log.flush(2.0)  # this process's own records, written within the flush interval anyway
    reader = open_log(router.view.loaded, check=False)
    try:
        rows = reader.stat_rows(since_ts=time.time() - _HOUR_S)
    finally:
        reader.close()
    return {"requests": len(rows), "cost_usd": sum(r.get("cost_usd") or 0.0 for r in rows),
            "backends": [{"name": s.backend, "requests": s.requests, "errors": s.errors, "cost_usd": s.cost_usd,
                          "p50_s": s.p50_s} for s in summarize(rows)]}


class SlowPanels:
    """The log's last hour and the learning panel, rebuilt off the loop at most every `every_s`."""

    def __init__(self, router: RouterService, *, every_s: float = 10.0):
        self.router = router
        self.every_s = every_s
        self._value: dict[str, Any] = {}
        self._built = -float("inf")  # time.monotonic()
        self._lock = asyncio.Lock()

    def _build(self) -> dict[str, Any]:
        try:
            hour: dict[str, Any] | None = log_hour(self.router)
        except Exception as exc:  # a log that cannot be read now must not take the page down
            hour = {"error": f"{type(exc).__name__}: {self.router.view.redactor.text(str(exc))}"}
        return {"log_hour": hour, "learning": learning_panel(self.router)}

    async def get(self) -> dict[str, Any]:
        async with self._lock:  # one build at a time; the others wait for it and share it
            if time.monotonic() - self._built >= self.every_s:
                self._value = await asyncio.to_thread(self._build)
                self._built = time.monotonic()
        return self._value
