"""The local SQLite file (`route.db` in the user data dir, or `log.path`): the request log when
`log.backend` is sqlite, and the learned latency (router/store/latency.py) when `state` is local.

Several processes (CLI runs, server workers) may write at once: WAL mode, a busy timeout, and
short transactions make that safe. The schema is router/store/schema.py's, its version in
`PRAGMA user_version`, upgraded in place. Never stores keys. The file is 0600 (router/store/files.py).

Damage never takes the router down (router/store/health.py): `check=True` runs SQLite's
quick_check when opening, and `repair=True` moves a damaged file aside (one warning) and starts a
fresh one; failures are StoreError with the kind named (damaged, unwritable, full, busy). Each
connection follows the file: when another connection (the log's writer, another process) moved
it aside, the next use reconnects to the file now at the path, so no part of the router keeps
writing to, or failing on, the old one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from backends.errors import ConfigError
from router.paths import user_data_dir
from router.store.files import private_dirs, private_file
from router.store.health import StoreError, classify, move_aside
from router.store.queries import SQLITE, LogQueries
from router.store.records import COLUMNS, RequestRecord, row_for, spend_by_minute
from router.store.schema import SCHEMA_VERSION, statements

__all__ = ["SqliteDb", "Store", "default_store_path"]

_LOG = logging.getLogger("router.store")

_INSERT = SQLITE.insert(COLUMNS)
# What one bad row raises at INSERT; anything else concerns the whole file.
_ROW_ERRORS = (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError, OverflowError, ValueError)
_BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's lock before it fails


def default_store_path() -> Path:
    return user_data_dir() / "route.db"


def _enable_wal(conn: sqlite3.Connection, timeout_s: float = _BUSY_TIMEOUT_S) -> None:
    """Switch to WAL. Two processes creating the file at once can get SQLITE_BUSY here without
    the busy timeout applying (the switch needs an exclusive lock), so retry for as long as the
    busy timeout would have waited: `route serve --workers` starts its workers together, and on
    a loaded machine the one holding the lock may not run again for a while."""
    give_up = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= give_up:
                raise
            time.sleep(0.02)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class SqliteDb:
    """A connection per thread to one database file, migrated; safe across processes.

    `check`: run quick_check when opening (catches damage in the middle of the file, at a cost
    that grows with its size: about 0.25 s for 200 MB). `repair`: move a damaged file aside and
    start a fresh one, with one warning; without it a damaged file is a StoreError."""

    def __init__(self, path: str | Path | None = None, *, check: bool = False, repair: bool = False):
        self.path = Path(path) if path else default_store_path()
        self.repair = repair
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
        conn = self._connect()
        if check:  # before migrating: a damaged file is moved aside, not written to
            result = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if result != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {result}")
        self._migrate(conn)

    def _start_fresh(self, error: StoreError) -> None:
        """Move the damaged file aside (unless another connection already did) and open a new one."""
        inode = self.path.stat().st_ino if self.path.exists() else None
        self.close()
        moved = move_aside(self.path, inode)
        if moved is not None:
            self.moved_aside = moved
            _LOG.warning("route: the local store %s was damaged (%s); moved it aside to %s and started a new one",
                         self.path, error.detail, moved)
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
        """This thread's connection to the file now at `path`."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and _identity(self.path) != self._local.identity:
            conn.close()  # the file was moved aside (or replaced): follow the path, not the old file
            conn = None
        if conn is None:
            conn = self._connect()
            self._migrate(conn)
        return conn

    def _connect(self) -> sqlite3.Connection:
        private_dirs(self.path.parent)
        private_file(self.path)
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        self._local.conn, self._local.identity = conn, _identity(self.path)
        conn.execute(f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT_S * 1000)}")
        _enable_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable on app crash, fast
        conn.row_factory = sqlite3.Row
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
            for _, step in statements("sqlite", version):
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (a full disk does)
                conn.execute("ROLLBACK")
            raise

    def transaction(self, work: Any) -> Any:
        """Run `work(conn)` inside BEGIN IMMEDIATE ... COMMIT; a damaged file (with `repair`) is
        moved aside and the work done once more on the fresh one."""
        for attempt in (1, 2):
            try:
                conn = self._conn()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = work(conn)
                    conn.execute("COMMIT")
                    return result
                except BaseException:
                    if conn.in_transaction:  # SQLite may have rolled back already (a full disk does)
                        conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError) as exc:
                error = classify(exc, self.path)
                if error.kind != "damaged" or not self.repair or attempt == 2:
                    raise error from None
                self._start_fresh(error)
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class Store(SqliteDb, LogQueries):
    """The request log in the local SQLite file: writing batches, reading, spend and feedback."""

    dialect = SQLITE

    def _read(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        return [dict(row) for row in self._conn().execute(sql, params)]

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        with self.guard():
            self.transaction(lambda conn: [conn.execute(sql, params) for sql, params in statements])

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
        refuses is left out and returned as (index, error); the rest are written, and their cost
        added to the `spend` table. Errors that affect the whole file (full disk, damage, locks)
        raise StoreError.

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
            conn.executemany(SQLITE.add_spend, spend_by_minute(rows, {i for i, _ in failed}))
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
