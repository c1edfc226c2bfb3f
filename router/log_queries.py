"""The request log's SQL, written once for both stores: SQLite (router/store.py) and PostgreSQL
(router/pg_log.py). The stores differ in two things only, so a `Dialect` names them: the
parameter marker and how a field inside the decision's JSON is read.

Both stores keep the same `requests` columns (`RequestRecord`'s fields, plus `id`), so what
`route log` and `route stats` print does not depend on where the log lives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["POSTGRES", "SQLITE", "Dialect", "LogReader", "record_dict"]


@dataclass(frozen=True, slots=True)
class Dialect:
    param: str  # the DB-API parameter marker
    downgraded_to: str  # SQL reading decision.downgraded.to_tier from the JSON text

    def recent(self, limit: int, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None) -> tuple[str, list[Any]]:
        """The newest `limit` requests matching the filters, newest first."""
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("backend", backend), ("status", status)):
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

    def stat_rows(self, since_ts: float | None = None) -> tuple[str, list[Any]]:
        """The numeric columns `route stats` aggregates (no prompts or answers), oldest first."""
        where, params = (f"WHERE ts >= {self.param}", [since_ts]) if since_ts is not None else ("", [])
        return ("SELECT ts, backend, status, input_tokens, output_tokens, cost_usd, ttft_s, total_s, decode_tps, tier, "
                f"{self.downgraded_to} AS downgraded_to FROM requests {where} ORDER BY id", params)

    def insert(self, columns: tuple[str, ...]) -> str:
        return f"INSERT INTO requests ({', '.join(columns)}) VALUES ({', '.join(self.param for _ in columns)})"


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


class LogReader(Protocol):
    """What `route log`, `route stats` and the spend cap read, from either store."""

    def recent(self, limit: int = 20, *, backend: str | None = None, status: str | None = None,
               since_ts: float | None = None) -> list[dict[str, Any]]: ...

    def get(self, request_id: int) -> dict[str, Any] | None: ...

    def count(self) -> int: ...

    def stat_rows(self, *, since_ts: float | None = None) -> list[dict[str, Any]]: ...

    def guard(self) -> Any: ...

    def close(self) -> None: ...
