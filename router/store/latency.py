"""Learned latency in the local SQLite file (`state: backend: local`), apart from the request log.

It shares the file with a SQLite request log but not its fate: it is chosen by `state:`, not
`log:` (a PostgreSQL log leaves it local; a Redis state replaces it), and it opens, follows and
repairs the file on its own (router/store/sqlite.py), so a file the log's writer moved aside is
left behind here too, and damage found here is moved aside here, once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from router.store.sqlite import SqliteDb

__all__ = ["LatencyStore"]


class LatencyStore(SqliteDb):
    """The `latency_state` table: one JSON state (owned by policies.latency) per backend."""

    def load_latency(self) -> dict[str, dict[str, Any]]:
        def read(conn: Any) -> dict[str, dict[str, Any]]:
            return {row[0]: json.loads(row[1]) for row in conn.execute("SELECT backend, state FROM latency_state")}

        return self.transaction(read)

    def update_latency(self, merge: Callable[[dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]) -> None:
        """Read every stored state, let `merge` compute the ones to write, and write them, in one
        IMMEDIATE transaction: concurrent processes' read-merge-writes serialise, none is lost."""

        def write(conn: Any) -> None:
            stored = {row[0]: json.loads(row[1]) for row in conn.execute("SELECT backend, state FROM latency_state")}
            states = merge(stored)
            now = time.time()
            conn.executemany(
                "INSERT INTO latency_state (backend, state, updated) VALUES (?, ?, ?) "
                "ON CONFLICT(backend) DO UPDATE SET state = excluded.state, updated = excluded.updated",
                [(name, json.dumps(state), now) for name, state in states.items()],
            )

        self.transaction(write)
