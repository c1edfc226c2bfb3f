"""The request log in PostgreSQL (`log: {backend: postgres, dsn: "${ROUTE_PG_DSN}"}`): one database
every replica appends to, read by `route log` and `route stats` like the SQLite one, holding the
feedback and the spend as well (the same schema, router/store/schema.py).

Migrations: `schema_version` holds one row per step applied, under a transaction-scoped advisory
lock, so replicas starting together migrate once. The tables live in the DSN's default schema;
give route a schema of its own with `options=-csearch_path=route`.

Timeouts: connecting waits at most `timeout_s` (libpq's connect_timeout, at least 2 s), a
statement at most `timeout_s` on the server (statement_timeout), and every call at most
`timeout_s` on this side too: a frozen server (SIGSTOP, a hung host) still accepts connections
and acknowledges data, so only a client-side deadline notices it. When it passes, the socket is
shut down under the blocked call, which then fails like a dropped connection.

Failures are StoreError: `unreachable` (the server is down, refuses us, dropped the connection
or did not answer in time: the writer keeps the records and retries), `failed` (anything else).
Messages name the server as user@host:port/database, never with the password.

Needs the optional driver: `pip install 'latency-router[postgres]'` (psycopg 3).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from backends.errors import ConfigError
from router.store.health import StoreError
from router.store.queries import POSTGRES, LogQueries
from router.store.records import COLUMNS, spend_by_minute
from router.store.schema import SCHEMA_VERSION, statements

__all__ = ["SCHEMA_VERSION", "PgStore", "describe_dsn", "require_driver"]

INSTALL = "pip install 'latency-router[postgres]'"
DEFAULT_TIMEOUT_S = 5.0
_LOCK_KEY = 0x726F7574655F6C67  # "route_lg": the advisory lock migrations take
_MIGRATION_S = 600.0  # a migration may rewrite a big table; a frozen server is still noticed
_INSERT = POSTGRES.insert(COLUMNS)
_PROGRESS = ("INSERT INTO spool_replayed (spool, upto) VALUES (%s, %s) "
             "ON CONFLICT (spool) DO UPDATE SET upto = excluded.upto")


def require_driver(where: str = "") -> Any:
    """The psycopg module, or a ConfigError saying how to install it."""
    try:
        import psycopg
    except ImportError:
        raise ConfigError(
            f"{where}log.backend: postgres needs the PostgreSQL driver, psycopg 3, which is not installed. Install "
            f"the postgres extra: {INSTALL} (or set log.backend: sqlite to log to the local file)."
        ) from None
    return psycopg


def describe_dsn(dsn: str) -> str:
    """user@host:port/database for messages: never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # a malformed DSN: say so without echoing it
        return "PostgreSQL (a malformed connection string)"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


def _scrub(text: str, dsn: str) -> str:
    """`text` without the DSN's password, should a driver message ever carry it."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        password = conninfo_to_dict(dsn).get("password")
    except Exception:
        return text.replace(dsn, "<dsn>")
    return text.replace(str(password), "***") if password else text


def _pg_cell(value: Any) -> Any:
    # PostgreSQL text cannot hold NUL, which SQLite (and Python) can: keep the rest of the text.
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


class _Deadline:
    """Shuts a connection's socket down when one call outlives `seconds`: the blocked call
    then fails at once. Armed around each call; a cut only ever lands during one."""

    def __init__(self) -> None:
        self.fired = False
        self._lock = threading.Lock()
        self._fd: int | None = None

    @contextlib.contextmanager
    def around(self, fd: int, seconds: float) -> Iterator[None]:
        with self._lock:
            self._fd, self.fired = fd, False
        timer = threading.Timer(seconds, self._cut)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            with self._lock:
                self._fd = None
            timer.cancel()

    def _cut(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            self.fired = True
            with contextlib.suppress(OSError):
                # A duplicate descriptor of the same socket: shutdown acts on the connection.
                with socket.socket(fileno=os.dup(self._fd)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)


class PgStore(LogQueries):
    """One connection to the log's PostgreSQL database; migrated when opened. Used from one
    thread at a time (the log's writer thread, or a CLI command)."""

    dialect = POSTGRES

    def __init__(self, dsn: str, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.dsn = dsn
        self.where = describe_dsn(dsn)
        self.timeout_s = timeout_s
        self._deadline = _Deadline()
        psycopg = require_driver()
        from psycopg.rows import dict_row

        try:
            self._conn = psycopg.connect(dsn, connect_timeout=max(2, math.ceil(timeout_s)), autocommit=True,
                                         row_factory=dict_row)
        except psycopg.Error as exc:
            raise self._classify(exc) from None
        try:
            with self.guard():
                self._conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{round(timeout_s * 1000)}ms",))
            with self.guard(_MIGRATION_S):
                self._migrate()
        except BaseException:
            self.close()
            raise

    def _classify(self, exc: BaseException) -> StoreError:
        import psycopg

        detail = _scrub(" ".join(str(exc).split()), self.dsn)
        late = (self._deadline.fired or isinstance(exc, psycopg.errors.QueryCanceled)
                or "timeout expired" in detail)  # libpq's connect_timeout
        if late:
            return StoreError("unreachable", f"PostgreSQL at {self.where} did not answer within {self.timeout_s:.1f} s "
                                             "(log.timeout_ms): it is frozen, overloaded or cut off; the request log "
                                             "keeps its records until it answers.", detail)
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            return StoreError("unreachable", f"PostgreSQL at {self.where} cannot be reached ({detail}); the request log "
                                             "keeps its records until it answers.", detail)
        return StoreError("failed", f"PostgreSQL at {self.where} refused the request log ({detail}).", detail)

    @contextlib.contextmanager
    def guard(self, seconds: float | None = None) -> Iterator[None]:
        """Within `seconds` (default `timeout_s`), turning driver errors into a StoreError that
        says what happened."""
        import psycopg

        try:
            with self._deadline.around(self._conn.pgconn.socket, seconds or self.timeout_s):
                yield
        except psycopg.Error as exc:
            raise self._classify(exc) from None

    def _migrate(self) -> None:
        with self._conn.transaction():
            # A step may rewrite a big table (the spend backfill): no statement timeout here.
            self._conn.execute("SET LOCAL statement_timeout = 0")
            # Serialises replicas starting together: the second sees the first's tables.
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            self._conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                               "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            row = self._conn.execute("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version").fetchone()
            version = row["v"] if row else 0
            if version > SCHEMA_VERSION:
                raise ConfigError(f"the request log at {self.where} was written by a newer version of route (schema "
                                  f"{version}, this one knows {SCHEMA_VERSION}); upgrade route, or point log.dsn at "
                                  "another database.")
            for step, sql in statements("postgres", version):
                for statement in sql:
                    self._conn.execute(statement)
                self._conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (step,))

    # -- the shared queries' primitives -----------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        with self.guard(), self._conn.transaction():
            return list(self._conn.execute(sql, params))

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        with self.guard(), self._conn.transaction():
            for sql, params in statements:
                self._conn.execute(sql, params)

    # -- writing --------------------------------------------------------------------------

    def log_rows(self, rows: list[tuple], *, progress: tuple[str, int] | None = None) -> list[tuple[int, Exception]]:
        """Insert rows made by `row_for` in one transaction, with their spend; a row PostgreSQL
        refuses is left out alone and returned as (index, error). `progress` (spool file,
        lines) is recorded in the same transaction: a spool replayed twice writes nothing twice.
        Losing the server raises StoreError `unreachable`."""
        if not rows and progress is None:
            return []
        import psycopg

        rows = [tuple(_pg_cell(v) for v in row) for row in rows]
        with self.guard():
            try:
                with self._conn.transaction(), self._conn.cursor() as cur:
                    cur.executemany(_INSERT, rows)
                    self._after_insert(cur, rows, [], progress)
                return []
            except (psycopg.DataError, psycopg.IntegrityError):
                return self._insert_one_by_one(rows, progress)  # the batch was rolled back: redo it, leaving the bad rows out

    def _insert_one_by_one(self, rows: list[tuple], progress: tuple[str, int] | None) -> list[tuple[int, Exception]]:
        import psycopg

        failed: list[tuple[int, Exception]] = []
        with self._conn.transaction(), self._conn.cursor() as cur:
            for i, row in enumerate(rows):
                try:
                    with self._conn.transaction():  # a savepoint: a bad row undoes only itself
                        cur.execute(_INSERT, row)
                except (psycopg.DataError, psycopg.IntegrityError) as exc:
                    failed.append((i, exc))
            self._after_insert(cur, rows, failed, progress)
        return failed

    @staticmethod
    def _after_insert(cur: Any, rows: list[tuple], failed: list[tuple[int, Exception]],
                      progress: tuple[str, int] | None) -> None:
        spend = spend_by_minute(rows, {i for i, _ in failed})
        if spend:
            cur.executemany(POSTGRES.add_spend, spend)
        if progress is not None:
            cur.execute(_PROGRESS, progress)

    def replayed(self, spool: str) -> int:
        """Lines of the spool file `spool` this database already holds."""
        rows = self._read("SELECT upto FROM spool_replayed WHERE spool = %s", [spool])
        return int(rows[0]["upto"]) if rows else 0

    def forget(self, spool: str) -> None:
        """A spool file replayed to its end and deleted: its progress is no longer needed."""
        self._write([("DELETE FROM spool_replayed WHERE spool = %s", [spool])])

    def schema_version(self) -> int:
        return int(self._read("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version", [])[0]["v"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
