"""`state: backend: local`: learned latency in this machine's SQLite store, merged atomically by
every process that uses it (router/latency_tracker.py, router/store/latency.py). Breakers stay per
process: each `route serve` worker and CLI run counts failures and opens its own."""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING

from backends.errors import ConfigError
from router.state.base import SharedState, StateStatus

if TYPE_CHECKING:
    from policies.breaker import BreakerBoard
    from router.config import Config
    from router.latency_tracker import LatencyTracker

__all__ = ["LocalState"]

_LOG = logging.getLogger(__name__)


class LocalState(SharedState):
    kind = "local"

    def __init__(self, config: Config):
        self._config = config
        self._latency: LatencyTracker | None = None
        self._path: str | None = None

    def attach(self, latency: LatencyTracker, breakers: BreakerBoard) -> str | None:
        from router.store import StoreError, latency_store_for

        try:
            store = latency_store_for(self._config)  # a damaged file is moved aside
            latency.attach_store(store)
        except (OSError, ConfigError, sqlite3.Error, StoreError) as exc:
            return str(exc)
        self._latency, self._path = latency, str(store.path)
        return None

    def status(self) -> StateStatus:
        return StateStatus(self.kind, shared=self._latency is not None, target=self._path)
