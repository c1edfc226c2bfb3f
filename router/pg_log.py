"""The request log in PostgreSQL (`log: {backend: postgres, dsn: ${ROUTE_PG_DSN}}`): one table
every replica appends to, read by `route log` and `route stats` like the SQLite one.

Schema: the same `requests` columns as the SQLite store. `schema_version` holds one row per
migration applied; `_MIGRATIONS[i]` takes the database from version i to i+1, under a
transaction-scoped advisory lock, so replicas starting together migrate once. The tables live in
the DSN's default schema; give route a schema of its own with `options=-csearch_path=route`.

Failures are StoreError: `unreachable` (the server is down, refuses us, or dropped the
connection: the writer keeps the records and retries), `failed` (anything else). Messages
name the server as user@host:port/database, never with the password.

Needs the optional driver: `pip install 'latency-router[postgres]'` (psycopg 3).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from backends.errors import ConfigError
from router.log_queries import POSTGRES, record_dict
from router.store import COLUMNS
from router.store_health import StoreError

__all__ = ["SCHEMA_VERSION", "PgLogStore", "describe_dsn", "require_driver"]

INSTALL = "pip install 'latency-router[postgres]'"
_LOCK_KEY = 0x726F7574655F6C67  # "route_lg": the advisory lock migrations take

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE requests (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,     -- unix seconds
        source TEXT NOT NULL,             -- cli | api | server
        trace_id TEXT,
        requested TEXT,
        backend TEXT,
        model TEXT,
        status TEXT NOT NULL,             -- ok | error | cancelled
        error_type TEXT,
        error TEXT,
        input_tokens BIGINT,
        output_tokens BIGINT,
        cost_usd DOUBLE PRECISION,
        ttft_s DOUBLE PRECISION,
        total_s DOUBLE PRECISION,
        decode_tps DOUBLE PRECISION,
        score DOUBLE PRECISION,
        tier TEXT,
        decision TEXT,                    -- JSON: the routing decision and explanation
        prompt TEXT,
        answer TEXT,
        simulated SMALLINT NOT NULL DEFAULT 0
    );
    CREATE INDEX requests_ts ON requests (ts);
    CREATE INDEX requests_backend_ts ON requests (backend, ts);
    """,
    # 2: the model's thinking, apart from the answer; NULL unless log.store_thinking is true
    "ALTER TABLE requests ADD COLUMN thinking TEXT",
)
SCHEMA_VERSION = len(_MIGRATIONS)
_INSERT = POSTGRES.insert(COLUMNS)


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


def _classify(exc: BaseException, dsn: str) -> StoreError:
    import psycopg

    where = describe_dsn(dsn)
    detail = _scrub(" ".join(str(exc).split()), dsn)
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return StoreError("unreachable", f"PostgreSQL at {where} cannot be reached ({detail}); the request log keeps "
                                         "records in memory and writes them once it is back.", detail)
    return StoreError("failed", f"PostgreSQL at {where} refused the request log ({detail}).", detail)


def _pg_cell(value: Any) -> Any:
    # PostgreSQL text cannot hold NUL, which SQLite (and Python) can: keep the rest of the text.
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


class PgLogStore:
    """One connection to the request log's PostgreSQL database; migrated when opened. Used from
    one thread at a time (the log's writer thread, or a CLI command)."""

    def __init__(self, dsn: str, *, connect_timeout_s: float = 5.0):
        self.dsn = dsn
        self.where = describe_dsn(dsn)
        psycopg = require_driver()
        from psycopg.rows import dict_row

        try:
            self._conn = psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout_s)), autocommit=True,
                                         row_factory=dict_row)
        except psycopg.Error as exc:
            raise _classify(exc, dsn) from None
        try:
            self._migrate()
        except psycopg.Error as exc:
            self.close()
            raise _classify(exc, dsn) from None
        except BaseException:
            self.close()
            raise

    def _migrate(self) -> None:
        with self._conn.transaction():
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
            for step in range(version, SCHEMA_VERSION):
                for statement in filter(str.strip, _MIGRATIONS[step].split(";")):
                    self._conn.execute(statement)
                self._conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (step + 1,))

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Turn driver errors inside the block into a StoreError that says what happened."""
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            raise _classify(exc, self.dsn) from None

    # -- writing --------------------------------------------------------------------------

    def log_rows(self, rows: list[tuple]) -> list[tuple[int, Exception]]:
        """Insert rows made by `row_for` in one transaction; a row PostgreSQL refuses is left out
        alone and returned as (index, error). Losing the server raises StoreError `unreachable`."""
        if not rows:
            return []
        import psycopg

        rows = [tuple(_pg_cell(v) for v in row) for row in rows]
        try:
            try:
                with self._conn.transaction(), self._conn.cursor() as cur:
                    cur.executemany(_INSERT, rows)
                return []
            except (psycopg.DataError, psycopg.IntegrityError):
                return self._insert_one_by_one(rows)  # the batch was rolled back: redo it, leaving the bad rows out
        except psycopg.Error as exc:
            raise _classify(exc, self.dsn) from None

    def _insert_one_by_one(self, rows: list[tuple]) -> list[tuple[int, Exception]]:
        import psycopg

        failed: list[tuple[int, Exception]] = []
        with self._conn.transaction():
            for i, row in enumerate(rows):
                try:
                    with self._conn.transaction():  # a savepoint: a bad row undoes only itself
                        self._conn.execute(_INSERT, row)
                except (psycopg.DataError, psycopg.IntegrityError) as exc:
                    failed.append((i, exc))
        return failed

    # -- reading --------------------------------------------------------------------------

    def recent(self, limit: int = 20, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None) -> list[dict[str, Any]]:
        """Newest first."""
        sql, params = POSTGRES.recent(limit, backend=backend, status=status, since_ts=since_ts)
        return [record_dict(row) for row in self._read(sql, params)]

    def get(self, request_id: int) -> dict[str, Any] | None:
        sql, params = POSTGRES.get(request_id)
        rows = self._read(sql, params)
        return record_dict(rows[0]) if rows else None

    def count(self) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM requests", [])[0]["n"])

    def stat_rows(self, *, since_ts: float | None = None) -> list[dict[str, Any]]:
        """The numeric columns `route stats` aggregates, oldest first."""
        sql, params = POSTGRES.stat_rows(since_ts)
        return self._read(sql, params)

    def _read(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        with self.guard(), self._conn.transaction():
            return list(self._conn.execute(sql, params))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
