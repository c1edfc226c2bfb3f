"""The one local SQLite store: the request log and the learned latency state, in the user data dir.

Several processes (CLI runs, a server) may write at once: WAL mode, a busy timeout, and short
transactions make that safe. The schema version lives in `PRAGMA user_version`; `_MIGRATIONS[i]`
takes a database from version i to i+1, so old files are upgraded in place. Never stores keys.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from backends.errors import ConfigError
from router.paths import user_data_dir

__all__ = ["RequestRecord", "Store", "default_store_path", "store_for"]

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,                 -- unix seconds
        source TEXT NOT NULL,             -- cli | api | server
        trace_id TEXT,
        requested TEXT,                   -- the model name asked for ("auto" when routed)
        backend TEXT,
        model TEXT,
        status TEXT NOT NULL,             -- ok | error
        error_type TEXT,
        error TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        cost_usd REAL,
        ttft_s REAL,
        total_s REAL,
        decode_tps REAL,
        score REAL,
        tier TEXT,
        decision TEXT,                    -- JSON: the routing decision and explanation
        prompt TEXT,                      -- NULL when logging of content is off
        answer TEXT,
        simulated INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX requests_ts ON requests (ts);
    CREATE INDEX requests_backend_ts ON requests (backend, ts);
    CREATE TABLE latency_state (
        backend TEXT PRIMARY KEY,
        state TEXT NOT NULL,              -- JSON owned by policies.latency
        updated REAL NOT NULL
    );
    """,
)

SCHEMA_VERSION = len(_MIGRATIONS)


def default_store_path() -> Path:
    return user_data_dir() / "route.db"


def _enable_wal(conn: sqlite3.Connection, attempts: int = 100) -> None:
    """Switch to WAL. Two processes creating the file at once can get SQLITE_BUSY here without
    the busy timeout applying (the switch needs an exclusive lock), so retry briefly."""
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.02)


def store_for(config) -> Store:
    """The store a config points at: `log.path`, else the user data dir."""
    path = config.log.path
    return Store(Path(path).expanduser() if path else None)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    source: str
    status: str
    ts: float = 0.0
    trace_id: str | None = None
    requested: str | None = None
    backend: str | None = None
    model: str | None = None
    error_type: str | None = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    ttft_s: float | None = None
    total_s: float | None = None
    decode_tps: float | None = None
    score: float | None = None
    tier: str | None = None
    decision: dict[str, Any] | None = None
    prompt: str | None = None
    answer: str | None = None
    simulated: bool = False


_COLUMNS = tuple(f.name for f in fields(RequestRecord))
_INSERT = f"INSERT INTO requests ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})"


class Store:
    """A connection per thread to one database file; safe across processes."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._migrate(self._conn())

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable on app crash, fast
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ConfigError(f"{self.path} was written by a newer version of route (schema {version}, this one "
                              f"knows {SCHEMA_VERSION}); upgrade route, or move the file aside to start a new log.")
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for step in range(version, SCHEMA_VERSION):
                for statement in filter(str.strip, _MIGRATIONS[step].split(";")):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- request log ----------------------------------------------------------------------

    def log(self, records: RequestRecord | Iterable[RequestRecord]) -> None:
        """Append one record or a batch, in one transaction."""
        batch = [records] if isinstance(records, RequestRecord) else list(records)
        if not batch:
            return
        rows = [self._row(r) for r in batch]
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _row(record: RequestRecord) -> tuple:
        values = asdict(record)
        values["ts"] = values["ts"] or time.time()
        values["decision"] = json.dumps(values["decision"], default=str) if values["decision"] else None
        values["simulated"] = int(bool(values["simulated"]))
        return tuple(values[c] for c in _COLUMNS)

    def recent(self, limit: int = 20, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None) -> list[dict[str, Any]]:
        """Newest first."""
        clauses: list[str] = []
        params: list[str | float] = []
        for column, value in (("backend", backend), ("status", status)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if since_ts is not None:
            clauses.append("ts >= ?")
            params.append(since_ts)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._conn().execute(f"SELECT * FROM requests {where} ORDER BY id DESC LIMIT ?", (*params, limit))
        return [self._record_dict(row) for row in rows]

    def count(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM requests").fetchone()[0]

    def stat_rows(self, *, since_ts: float | None = None) -> list[dict[str, Any]]:
        """The numeric columns `route stats` aggregates (no prompts or answers), oldest first."""
        where, params = ("WHERE ts >= ?", (since_ts,)) if since_ts is not None else ("", ())
        rows = self._conn().execute(
            "SELECT ts, backend, status, input_tokens, output_tokens, cost_usd, ttft_s, total_s, decode_tps, tier, "
            "json_extract(decision, '$.downgraded.to_tier') AS downgraded_to "
            f"FROM requests {where} ORDER BY id", params)
        return [dict(row) for row in rows]

    @staticmethod
    def _record_dict(row: sqlite3.Row) -> dict[str, Any]:
        record = dict(row)
        if record.get("decision"):
            record["decision"] = json.loads(record["decision"])
        record["simulated"] = bool(record["simulated"])
        return record

    # -- latency state --------------------------------------------------------------------

    def load_latency(self) -> dict[str, dict[str, Any]]:
        rows = self._conn().execute("SELECT backend, state FROM latency_state")
        return {row["backend"]: json.loads(row["state"]) for row in rows}

    def update_latency(self, merge: Callable[[dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]) -> None:
        """Read every stored state, let `merge` compute the ones to write, and write them, in one
        IMMEDIATE transaction: concurrent processes' read-merge-writes serialise, none is lost."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            stored = {row[0]: json.loads(row[1]) for row in conn.execute("SELECT backend, state FROM latency_state")}
            states = merge(stored)
            now = time.time()
            conn.executemany(
                "INSERT INTO latency_state (backend, state, updated) VALUES (?, ?, ?) "
                "ON CONFLICT(backend) DO UPDATE SET state = excluded.state, updated = excluded.updated",
                [(name, json.dumps(state), now) for name, state in states.items()],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
