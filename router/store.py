"""The one local SQLite store: the request log and the learned latency state, in the user data dir.

Several processes (CLI runs, a server) may write at once: WAL mode, a busy timeout, and short
transactions make that safe. The schema version lives in `PRAGMA user_version`; `_MIGRATIONS[i]`
takes a database from version i to i+1, so old files are upgraded in place. Never stores keys.

Damage never takes the router down (router/store_health.py): `Store(check=True)` runs SQLite's
quick_check when opening, and `repair=True` moves a damaged file aside (one warning) and starts a
fresh one; failures are StoreError with the kind named (damaged, unwritable, full, busy). A batch
of records is written row by row inside one transaction, so one bad row never costs the others.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import orjson

from backends.errors import ConfigError
from router.log_queries import SQLITE, record_dict
from router.paths import user_data_dir
from router.store_health import StoreError, classify, move_aside

__all__ = ["COLUMNS", "RequestRecord", "Store", "StoreError", "default_store_path", "local_store_usable", "row_for", "store_for"]

_LOG = logging.getLogger(__name__)

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
    # 2: the model's thinking, apart from the answer; NULL unless log.store_thinking is true
    "ALTER TABLE requests ADD COLUMN thinking TEXT",
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


def store_for(config, *, check: bool = False, repair: bool = False) -> Store:
    """The store a config points at: `log.path`, else the user data dir."""
    path = config.log.path
    return Store(Path(path).expanduser() if path else None, check=check, repair=repair)


def local_store_usable(config, out, *, check: bool = False) -> bool:
    """Whether a CLI command that can do without the store (`route "..."`, `route serve`) should
    use it. Opening it moves a damaged file aside; an unusable one (read-only or missing
    directory, full disk) gives one warning through `out` and False, and the caller runs with
    logging and latency learning off."""
    try:
        store_for(config, check=check, repair=True).close()
    except StoreError as exc:
        out.info(f"[yellow]warning:[/] {exc} Running with the request log and latency learning off.")
        return False
    return True


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
    thinking: str | None = None  # never part of `answer`; kept only with log.store_thinking
    simulated: bool = False


COLUMNS = _COLUMNS = tuple(f.name for f in fields(RequestRecord))  # the `requests` columns but id, in order
_INSERT = SQLITE.insert(_COLUMNS)
_INT64 = 2**63
# What one bad row raises at INSERT; anything else concerns the whole file.
_ROW_ERRORS = (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError, OverflowError, ValueError)
# row_for fills every column but the decision (JSON text, not a cell) in order, then inserts it.
_PLAIN = tuple(c for c in _COLUMNS if c != "decision")
_TS, _DECISION = _PLAIN.index("ts"), _COLUMNS.index("decision")


def _cell(value: Any) -> Any:
    """A value SQLite stores as given, or ValueError: so a row that would fail at INSERT fails here."""
    if value is None or isinstance(value, bool):
        return None if value is None else int(value)
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise ValueError(f"integer {value} is outside SQLite's 64-bit range")
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        # A lone surrogate (possible from Python callers) cannot be encoded; keep the rest.
        return value if value.isascii() else value.encode("utf-8", "replace").decode("utf-8")
    raise ValueError(f"cannot store a {type(value).__name__}")


def row_for(record: RequestRecord) -> tuple:
    """The INSERT parameters for `record`, validated: raises ValueError or TypeError for a record
    that could not be written, so callers can refuse it alone. Runs on the event loop for every
    request, so it reads the fields directly: `dataclasses.asdict` deep-copies the decision and
    cost ~0.35 ms a record, most of what the log used to cost a request."""
    if not isinstance(record.source, str) or not isinstance(record.status, str):
        raise TypeError("source and status must be strings")
    cells = [_cell(getattr(record, c)) if c != "simulated" else int(bool(record.simulated)) for c in _PLAIN]
    cells[_TS] = cells[_TS] or time.time()
    cells.insert(_DECISION, _json(record.decision) if record.decision else None)
    return tuple(cells)


def _json(value: dict[str, Any]) -> str:
    """`value` as JSON text; orjson is ~7x faster than json, which still takes what orjson
    refuses (integers beyond 64 bits, lone surrogates)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, default=str)


class Store:
    """A connection per thread to one database file; safe across processes.

    `check`: run quick_check when opening (catches damage in the middle of the file, at a cost
    that grows with its size: about 0.25 s for 200 MB). `repair`: move a damaged file aside and
    start a fresh one, with one warning; without it a damaged file is a StoreError."""

    def __init__(self, path: str | Path | None = None, *, check: bool = False, repair: bool = False):
        self.path = Path(path) if path else default_store_path()
        self._local = threading.local()
        self.moved_aside: Path | None = None
        try:
            self._open(check)
        except (sqlite3.Error, OSError) as exc:
            self.close()
            error = classify(exc, self.path)
            if error.kind != "damaged" or not repair:
                raise error from None
            self._start_fresh(error)

    def _open(self, check: bool) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._conn()
        if check:
            result = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if result != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {result}")
        self._migrate(conn)

    def _start_fresh(self, error: StoreError) -> None:
        inode = self.path.stat().st_ino if self.path.exists() else None
        self.moved_aside = move_aside(self.path, inode)
        if self.moved_aside is not None:
            _LOG.warning("route: the local store %s was damaged (%s); moved it aside to %s and started a new one",
                         self.path, error.detail, self.moved_aside)
        try:
            self._open(check=False)
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise classify(exc, self.path) from None

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Turn SQLite and file errors inside the block into a StoreError that says what happened."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise classify(exc, self.path) from None

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
            if conn.in_transaction:  # SQLite may have rolled back already (a full disk does)
                conn.execute("ROLLBACK")
            raise

    # -- request log ----------------------------------------------------------------------

    def log(self, records: RequestRecord | Iterable[RequestRecord]) -> list[tuple[int, Exception]]:
        """Append one record or a batch, in one transaction; see `log_rows` for what it returns."""
        batch = [records] if isinstance(records, RequestRecord) else list(records)
        rows: list[tuple | None] = []
        refused: list[tuple[int, Exception]] = []
        for i, record in enumerate(batch):
            try:
                rows.append(row_for(record))
            except (ValueError, TypeError) as exc:
                rows.append(None)
                refused.append((i, exc))
        failed = self.log_rows([r for r in rows if r is not None])
        kept = [i for i, r in enumerate(rows) if r is not None]
        return sorted(refused + [(kept[j], exc) for j, exc in failed])

    def log_rows(self, rows: list[tuple]) -> list[tuple[int, Exception]]:
        """Insert rows made by `row_for` in one transaction, each on its own: a row SQLite
        refuses is left out and returned as (index, error); the rest are written. Errors that
        affect the whole file (full disk, damage, locks) raise StoreError.

        The batch goes in with one `executemany` (the writer thread then holds the GIL in one
        C loop rather than a Python loop per row); only when a row fails is the batch redone
        row by row, from a savepoint, to leave that row out alone."""
        if not rows:
            return []
        conn = self._conn()
        failed: list[tuple[int, Exception]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("SAVEPOINT batch")
            try:
                conn.executemany(_INSERT, rows)
            except _ROW_ERRORS:
                conn.execute("ROLLBACK TO batch")
                failed = self._insert_one_by_one(conn, rows)
            conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            # SQLite may already have rolled back (a full disk does): ROLLBACK would then fail and
            # hide the cause behind "cannot rollback - no transaction is active".
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise classify(exc, self.path) from None
        return failed

    @staticmethod
    def _insert_one_by_one(conn: sqlite3.Connection, rows: list[tuple]) -> list[tuple[int, Exception]]:
        failed: list[tuple[int, Exception]] = []
        for i, row in enumerate(rows):
            try:
                conn.execute(_INSERT, row)
            except _ROW_ERRORS as exc:
                failed.append((i, exc))  # this row only; the statement is undone, the transaction goes on
        return failed

    def recent(self, limit: int = 20, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None) -> list[dict[str, Any]]:
        """Newest first."""
        sql, params = SQLITE.recent(limit, backend=backend, status=status, since_ts=since_ts)
        return [record_dict(row) for row in self._conn().execute(sql, params)]

    def get(self, request_id: int) -> dict[str, Any] | None:
        """One logged request, prompt, answer and decision included, or None."""
        sql, params = SQLITE.get(request_id)
        row = self._conn().execute(sql, params).fetchone()
        return None if row is None else record_dict(row)

    def count(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM requests").fetchone()[0]

    def stat_rows(self, *, since_ts: float | None = None) -> list[dict[str, Any]]:
        """The numeric columns `route stats` aggregates (no prompts or answers), oldest first."""
        sql, params = SQLITE.stat_rows(since_ts)
        return [dict(row) for row in self._conn().execute(sql, params)]

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
            if conn.in_transaction:  # SQLite may have rolled back already (a full disk does)
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
