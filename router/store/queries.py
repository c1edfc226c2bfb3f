"""The log's SQL, written once for both stores: SQLite (router/store/sqlite.py) and PostgreSQL
(router/store/postgres.py). The stores differ in two things only, so a `Dialect` names them:
the parameter marker and how a field inside the decision's JSON is read.

`LogQueries` is what both stores offer on top of that SQL -- reading requests (`route log`,
`route stats`), the spend of a window (the spend cap), and feedback (verdicts and consortium
preferences) -- given two primitives each store implements: `_read(sql, params)` and
`_write([(sql, params), ...])`, the latter in one transaction. Both stores keep the same
columns, so what is printed or learned does not depend on where the log lives.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["POSTGRES", "SQLITE", "Dialect", "LogQueries", "LogReader", "record_dict"]


@dataclass(frozen=True, slots=True)
class Dialect:
    param: str  # the DB-API parameter marker
    downgraded_to: str  # SQL reading decision.downgraded.to_tier from the JSON text

    def recent(self, limit: int, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None, session: str | None = None) -> tuple[str, list[Any]]:
        """The newest `limit` requests matching the filters, newest first."""
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("backend", backend), ("status", status), ("session", session)):
            if value is not None:
                clauses.append(f"{column} = {self.param}")
                params.append(value)
        if since_ts is not None:
            clauses.append(f"ts >= {self.param}")
            params.append(since_ts)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return f"SELECT * FROM requests {where} ORDER BY id DESC LIMIT {self.param}", [*params, limit]

    def get(self, request_id: int) -> tuple[str, list[Any]]:
        return f"SELECT * FROM requests WHERE id = {self.param}", [request_id]

    def turns(self, session: str) -> tuple[str, list[Any]]:
        """A session's answered requests, oldest first: a conversation's turns."""
        return (f"SELECT * FROM requests WHERE session = {self.param} AND status = 'ok' ORDER BY id",
                [session])

    def last_of(self, source: str) -> tuple[str, list[Any]]:
        """The newest answered request from `source`."""
        return (f"SELECT id, session FROM requests WHERE source = {self.param} AND status = 'ok' "
                "ORDER BY id DESC LIMIT 1", [source])

    def stat_rows(self, since_ts: float | None = None) -> tuple[str, list[Any]]:
        """The numeric columns `route stats` aggregates (no prompts or answers), oldest first."""
        where, params = (f"WHERE ts >= {self.param}", [since_ts]) if since_ts is not None else ("", [])
        return ("SELECT ts, backend, status, input_tokens, output_tokens, cost_usd, ttft_s, total_s, decode_tps, tier, "
                f"{self.downgraded_to} AS downgraded_to FROM requests {where} ORDER BY id", params)

    def insert(self, columns: tuple[str, ...]) -> str:
        return f"INSERT INTO requests ({', '.join(columns)}) VALUES ({', '.join(self.param for _ in columns)})"

    @property
    def add_spend(self) -> str:
        """Upsert of one minute's spend: (minute, dollars)."""
        p = self.param
        return (f"INSERT INTO spend (minute, cost_usd) VALUES ({p}, {p}) "
                "ON CONFLICT (minute) DO UPDATE SET cost_usd = spend.cost_usd + excluded.cost_usd")


SQLITE = Dialect("?", "json_extract(decision, '$.downgraded.to_tier')")
# json, not jsonb: json keeps any text json.dumps wrote (jsonb refuses \u0000) and is only parsed here.
POSTGRES = Dialect("%s", "(decision::json #>> '{downgraded,to_tier}')")


def record_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """A `requests` row as `route log` shows it: the decision parsed, `simulated` a bool."""
    record = dict(row)
    if record.get("decision"):
        record["decision"] = json.loads(record["decision"])
    record["simulated"] = bool(record["simulated"])
    return record


class LogQueries:
    """Reads, spend and feedback over the shared SQL; mixed into both stores."""

    dialect: Dialect

    def _read(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run the statements in one transaction."""
        raise NotImplementedError

    # -- requests ---------------------------------------------------------------------------

    def recent(self, limit: int = 20, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None, session: str | None = None) -> list[dict[str, Any]]:
        """Newest first; `session`: only that session's (a conversation's turns)."""
        sql, params = self.dialect.recent(limit, backend=backend, status=status, since_ts=since_ts, session=session)
        return [record_dict(row) for row in self._read(sql, params)]

    def turns(self, session: str) -> list[dict[str, Any]]:
        """The answered requests of `session`, oldest first (what `route --continue` replays)."""
        sql, params = self.dialect.turns(session)
        return [record_dict(row) for row in self._read(sql, params)]

    def last_of(self, source: str) -> dict[str, Any] | None:
        """`id` and `session` of the newest answered request from `source` (cli, api, server), or None."""
        sql, params = self.dialect.last_of(source)
        rows = self._read(sql, params)
        return rows[0] if rows else None

    def get(self, request_id: int) -> dict[str, Any] | None:
        """One logged request, prompt, answer and decision included, or None."""
        sql, params = self.dialect.get(request_id)
        rows = self._read(sql, params)
        return record_dict(rows[0]) if rows else None

    def count(self) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM requests", [])[0]["n"])

    def stat_rows(self, *, since_ts: float | None = None) -> list[dict[str, Any]]:
        """The numeric columns `route stats` aggregates (no prompts or answers), oldest first."""
        sql, params = self.dialect.stat_rows(since_ts)
        return self._read(sql, params)

    def find_request(self, ref: str, columns: str = "id, key_name") -> dict[str, Any] | None:
        """`columns` of the request `ref` names -- its log id, or a trace id (the newest with
        it); None when the log holds no such request. Both lookups use an index."""
        p = self.dialect.param
        if ref.isdigit() and int(ref) < 2**63:
            rows = self._read(f"SELECT {columns} FROM requests WHERE id = {p}", [int(ref)])
            if rows:
                return rows[0]
        rows = self._read(f"SELECT {columns} FROM requests WHERE trace_id = {p} ORDER BY id DESC LIMIT 1", [ref])
        return rows[0] if rows else None

    # -- spend ------------------------------------------------------------------------------

    def spent_usd(self, since_ts: float) -> float:
        """Dollars spent since `since_ts`, by the minute: the minute holding `since_ts` counts
        whole (the cap errs on the side of refusing)."""
        rows = self._read(f"SELECT COALESCE(SUM(cost_usd), 0) AS spent FROM spend WHERE minute >= {self.dialect.param}",
                          [int(since_ts // 60)])
        return float(rows[0]["spent"])

    # -- feedback ---------------------------------------------------------------------------

    def add_verdict(self, request_id: int, verdict: str, giver: str | None = None) -> None:
        """A user's verdict on one logged request; it replaces any earlier verdict on it, so a
        request carries one label however often it is judged."""
        p = self.dialect.param
        ref = str(request_id)
        self._write([(f"DELETE FROM feedback WHERE request = {p} AND source = 'user'", [ref]),
                     (f"INSERT INTO feedback (ts, request, verdict, source, giver) VALUES ({p}, {p}, {p}, 'user', {p})",
                      [time.time(), ref, verdict, giver])])

    def add_preference(self, request: str, prompt: str, local: float, hosted: float) -> None:
        """A consortium's preference between a local and a hosted answer to `prompt`."""
        p = self.dialect.param
        self._write([(f"INSERT INTO feedback (ts, request, source, prompt, local, hosted) "
                      f"VALUES ({p}, {p}, 'consortium', {p}, {p}, {p})", [time.time(), request, prompt, local, hosted])])

    def feedback_rows(self) -> list[dict[str, Any]]:
        """Every verdict and preference, oldest first."""
        return self._read("SELECT * FROM feedback ORDER BY id", [])

    def feedback_count(self) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM feedback", [])[0]["n"])


class LogReader(Protocol):
    """What `route log`, `route stats`, feedback and the spend cap use, from either store."""

    def recent(self, limit: int = 20, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None, session: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, request_id: int) -> dict[str, Any] | None: ...

    def turns(self, session: str) -> list[dict[str, Any]]: ...

    def last_of(self, source: str) -> dict[str, Any] | None: ...

    def count(self) -> int: ...

    def stat_rows(self, *, since_ts: float | None = None) -> list[dict[str, Any]]: ...

    def find_request(self, ref: str, columns: str = "id, key_name") -> dict[str, Any] | None: ...

    def spent_usd(self, since_ts: float) -> float: ...

    def add_verdict(self, request_id: int, verdict: str, giver: str | None = None) -> None: ...

    def add_preference(self, request: str, prompt: str, local: float, hosted: float) -> None: ...

    def feedback_rows(self) -> list[dict[str, Any]]: ...

    def feedback_count(self) -> int: ...

    def guard(self) -> Any: ...

    def close(self) -> None: ...
