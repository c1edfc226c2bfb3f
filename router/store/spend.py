"""The optional spend cap (`spend: {cap_usd, window_days}`): what the request log says was spent
in the window, and a refusal once it reaches the cap -- on the Router's own path, so the Python
API, `route serve` (every protocol) and the CLI all refuse alike.

The log's `spend` table keeps dollars per minute (written with the records, router/store/
schema.py), so a read sums a few thousand rows whatever the traffic. A Router reads it at its
first request and then at most every `_REFRESH_S` (off the event loop), flushing its own log
first; in between it adds what its own requests cost as they finish. So this process's spend
counts at once; other processes' (CLI runs, replicas) within `_REFRESH_S` plus their log's flush
interval. When the log cannot be read (PostgreSQL away), the last figure read plus this
process's own spend decide, with one warning.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from backends.errors import UsageError
from router.store.health import StoreError

if TYPE_CHECKING:
    from router.config_loader import LoadedConfig
    from router.decision import Outcome
    from router.store.queries import LogReader
    from router.store.request_log import RequestLog

__all__ = ["SpendCap", "SpendCapReached", "spend_cap_for"]

_LOG = logging.getLogger("route")
_REFRESH_S = 5.0


class SpendCapReached(UsageError):
    """The logged spend of the window has reached `spend.cap_usd`."""


class SpendCap:
    """Refuses requests once `read(since)` (the log's spend since a unix time) plus this
    process's own spend since that read reaches `cap_usd`."""

    def __init__(self, cap_usd: float, window_days: float, read: Callable[[float], float], *,
                 clock: Callable[[], float] = time.time, refresh_s: float = _REFRESH_S):
        self.cap_usd = cap_usd
        self.window_days = window_days
        self._read = read
        self._clock = clock
        self._refresh_s = refresh_s
        self._logged = 0.0  # the log's figure at the last read
        self._own = 0.0  # this process's spend since that read began
        self._read_at: float | None = None
        self._lock = threading.Lock()
        self._warned = False

    def observe(self, outcome: Outcome) -> None:
        """A request observer: what this process's requests cost counts at once."""
        completion = outcome.result.completion if outcome.result is not None else None
        if completion is not None and not completion.metadata.get("simulated"):  # simulated: never spent
            self._own += completion.cost_usd or 0.0

    @property
    def spent(self) -> float:
        return self._logged + self._own

    async def check(self) -> None:
        """Raise SpendCapReached when the window's spend has reached the cap."""
        if self._read_at is None or self._clock() - self._read_at >= self._refresh_s:
            await asyncio.to_thread(self.refresh)
        if self.spent >= self.cap_usd:
            raise SpendCapReached(
                f"spend cap reached: ${self.spent:.4f} spent in the last {self.window_days:g} days, the cap is "
                f"${self.cap_usd:g} (spend.cap_usd in the config). Raise the cap, or wait for older requests to leave "
                f"the window; `route stats --since {self.window_days:g}d` shows where it went.")

    def refresh(self) -> None:
        """Read the log's figure (one reader at a time; a read just made by another is kept)."""
        with self._lock:
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self._refresh_s:
                return
            own_before = self._own
            try:
                logged = self._read(now - self.window_days * 86400)
            except StoreError as exc:
                self._read_at = now  # retried after _REFRESH_S, not on every request
                if not self._warned:
                    self._warned = True
                    _LOG.warning("route: spend cap: cannot read the spend from the request log (%s); counting the "
                                 "last figure read plus this process's own spend", exc)
                return
            self._warned = False
            self._logged, self._read_at = logged, now
            self._own -= own_before  # what was spent before the read is in the log's figure now


def spend_cap_for(loaded: LoadedConfig, log: RequestLog | None,
                  observe: Callable[[Callable[[Outcome], None]], None]) -> SpendCap | None:
    """The config's spend cap (None without `spend.cap_usd`), registered with `observe` as a
    request observer; it reads what `log` (this process's request log) and the others wrote."""
    settings = loaded.config.spend
    if settings.cap_usd is None:
        return None
    cap = SpendCap(settings.cap_usd, settings.window_days, lambda since: _logged_spend(loaded, log, since))
    observe(cap.observe)
    return cap


def _logged_spend(loaded: LoadedConfig, log: RequestLog | None, since: float) -> float:
    """The log's spend since `since`, after writing this process's own pending records. A SQLite
    log not yet created counts as nothing spent (and is not created here)."""
    from router.store.choice import log_target, open_log

    if log is not None:
        log.flush(timeout_s=1.0)
    target = log_target(loaded)
    if target.path is not None and not target.path.exists():
        return 0.0
    reader: LogReader = open_log(loaded, check=False)
    try:
        with reader.guard():
            return reader.spent_usd(since)
    finally:
        reader.close()
