"""The optional spend cap (`spend: {cap_usd, window_days}` in config): what the request log says
was spent in the window, and a refusal once it reaches the cap."""

from __future__ import annotations

import time

from backends.errors import UsageError
from router.config import Config
from router.log_queries import LogReader

__all__ = ["check_spend_cap", "spent_usd"]


def spent_usd(store: LogReader, *, since_ts: float | None = None) -> float:
    """Dollars the logged requests cost since `since_ts` (all time for None)."""
    return sum(row.get("cost_usd") or 0.0 for row in store.stat_rows(since_ts=since_ts))


def check_spend_cap(config: Config, store: LogReader) -> None:
    """Raise UsageError (exit 2) when the logged spend of the window has reached `spend.cap_usd`."""
    cap = config.spend.cap_usd
    if cap is None:
        return
    days = config.spend.window_days
    spent = spent_usd(store, since_ts=time.time() - days * 86400)
    if spent >= cap:
        raise UsageError(f"spend cap reached: ${spent:.4f} spent in the last {days:g} days, the cap is ${cap:g} "
                         "(spend.cap_usd in the config). Raise the cap, or wait for older requests to leave the "
                         "window; `route stats --since 30d` shows where it went.")
