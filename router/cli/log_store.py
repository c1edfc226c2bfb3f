"""The request log as `route log` and `route stats` read it: the store a config points at, the
--since window, and how a missing figure is shown."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["fmt", "open_store", "since_ts", "when"]


def open_store(config: str | None):
    """The request log the config points at: the SQLite file (`log.path`, else the user data
    dir), checked, or PostgreSQL (`log.backend: postgres`). A damaged file or an unreachable
    server is a StoreError (exit 2) naming it, never a driver traceback."""
    from router.config_loader import load_config
    from router.store.choice import open_log

    return open_log(load_config(config))


def _since(value: str | None) -> float | None:
    from router.cli.durations import parse_duration

    return None if value is None else time.time() - parse_duration(value, option="--since")


def _fmt(value: Any, spec: str, dash: str = "-") -> str:
    return dash if value is None else format(value, spec)


def _when(ts: float, *, short: bool = False) -> str:
    return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S", time.localtime(ts))


def since_ts(value: str | None) -> float | None:
    """The start of a --since window (30m, 1h, 2d) as a Unix time; None for all time."""
    from router.cli.durations import parse_duration

    return None if value is None else time.time() - parse_duration(value, option="--since")


def fmt(value: Any, spec: str, dash: str = "-") -> str:
    return dash if value is None else format(value, spec)


def when(ts: float, *, short: bool = False) -> str:
    return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S", time.localtime(ts))
