"""One routed request as the log keeps it: `RequestRecord`, and the INSERT row made from it.

`row_for` validates a record into the tuple both stores insert (SQLite and PostgreSQL keep the
same `requests` columns, `COLUMNS`, in order), so a record that could not be written fails here,
alone, rather than in the middle of a batch. `CLIENT_KEY` carries the name of the client key a
server request came with (router/server sets it), so the record can say whose request it was;
the key itself is never stored.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

import orjson

from router.request_context import CLIENT_KEY

__all__ = ["CLIENT_KEY", "COLUMNS", "RequestRecord", "row_for", "row_of", "spend_by_minute"]



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
    key_name: str | None = None  # the name of the client key that sent it (server.keys); never the key
    cache_read_tokens: int | None = None  # of input_tokens: read from the provider's prompt cache
    cache_write_tokens: int | None = None  # of input_tokens: written to it
    session: str | None = None  # the task the request belongs to (router/sessions.py)


COLUMNS = tuple(f.name for f in fields(RequestRecord))  # the `requests` columns but id, in order
_INT64 = 2**63
# row_for fills every column but the decision (JSON text, not a cell) in order, then inserts it.
_PLAIN = tuple(c for c in COLUMNS if c != "decision")
_TS, _SIMULATED, _DECISION = _PLAIN.index("ts"), _PLAIN.index("simulated"), COLUMNS.index("decision")
_DEFAULTS = {f.name: f.default for f in fields(RequestRecord)}
# positions in a row, for the spend table
TS, COST, SIMULATED = COLUMNS.index("ts"), COLUMNS.index("cost_usd"), COLUMNS.index("simulated")


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
    that could not be written, so callers can refuse it alone."""
    return row_of({c: getattr(record, c) for c in COLUMNS})


def row_of(values: Mapping[str, Any]) -> tuple:
    """`row_for` of the record these fields (RequestRecord's, absent ones at their defaults)
    would make, without making it: the request log's writer makes one row per request, and a
    26-field frozen dataclass costs more to build than the row itself."""
    if not isinstance(values.get("source"), str) or not isinstance(values.get("status"), str):
        raise TypeError("source and status must be strings")
    get = values.get
    cells = []
    for column in _PLAIN:
        value = get(column, _DEFAULTS[column])
        kind = type(value)
        # The cells stored as they are (most of every row) without a call each; the rest through _cell.
        if value is None or (kind is str and value.isascii()) or (kind is float and math.isfinite(value)) or (
                kind is int and -_INT64 <= value < _INT64):
            cells.append(value)
        else:
            cells.append(_cell(value) if column != "simulated" else value)
    cells[_SIMULATED] = int(bool(cells[_SIMULATED]))  # any value: stored as a flag
    cells[_TS] = cells[_TS] or time.time()
    decision = get("decision")
    cells.insert(_DECISION, _json(decision) if decision else None)
    return tuple(cells)


def _json(value: dict[str, Any]) -> str:
    """`value` as JSON text; orjson is ~7x faster than json, which still takes what orjson
    refuses (integers beyond 64 bits, lone surrogates)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, default=str)


def spend_by_minute(rows: list[tuple], skip: Collection[int] = ()) -> list[tuple[int, float]]:
    """(minute, dollars) for the rows written (all but the indexes in `skip`): what the `spend`
    table adds, so the spend cap reads a few thousand sums rather than every request. A
    simulated answer's cost is what it would have cost: shown, never spent."""
    minutes: dict[int, float] = {}
    for i, row in enumerate(rows):
        cost = row[COST]
        if i not in skip and cost and not row[SIMULATED]:
            minute = int(row[TS] // 60)
            minutes[minute] = minutes.get(minute, 0.0) + cost
    return sorted(minutes.items())
