"""The schema of route's stores: one list of steps, each in SQLite's and PostgreSQL's SQL.

`STEPS[i]` takes a database from version i to i+1. The local SQLite file keeps its version in
`PRAGMA user_version`, a PostgreSQL database in a `schema_version` table (one row per step);
both are upgraded in place when a store opens them (router/store/sqlite.py, postgres.py), inside
one transaction that serialises processes starting together. A step may have nothing to do in
one dialect (the learned latency lives in the local file only; spool replays concern PostgreSQL
only): its SQL there is empty, and the version still advances, so both count the same steps.

To add a table (or a column, an index): append a `Step` with the SQL for both dialects. Never
edit a step that has shipped: databases out there have run it. Statements are separated by `;`
(no `;` inside a statement).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["SCHEMA_VERSION", "STEPS", "Dialect", "Step", "statements"]

Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True, slots=True)
class Step:
    why: str
    sqlite: str = ""
    postgres: str = ""

    def sql(self, dialect: Dialect) -> list[str]:
        text = self.sqlite if dialect == "sqlite" else self.postgres
        return [s.strip() for s in text.split(";") if s.strip()]


_CACHE_AND_SESSION = """
    ALTER TABLE requests ADD COLUMN cache_read_tokens {integer};
    ALTER TABLE requests ADD COLUMN cache_write_tokens {integer};
    ALTER TABLE requests ADD COLUMN session TEXT
"""


def _requests(ident: str, real: str, integer: str, small: str) -> str:
    return f"""
    CREATE TABLE requests (
        id {ident},
        ts {real} NOT NULL,               -- unix seconds
        source TEXT NOT NULL,             -- cli | api | server
        trace_id TEXT,
        requested TEXT,                   -- the model name asked for ("auto" when routed)
        backend TEXT,
        model TEXT,
        status TEXT NOT NULL,             -- ok | error | cancelled
        error_type TEXT,
        error TEXT,
        input_tokens {integer},
        output_tokens {integer},
        cost_usd {real},
        ttft_s {real},
        total_s {real},
        decode_tps {real},
        score {real},
        tier TEXT,
        decision TEXT,                    -- JSON: the routing decision and explanation
        prompt TEXT,                      -- NULL when logging of content is off
        answer TEXT,
        simulated {small} NOT NULL DEFAULT 0
    );
    CREATE INDEX requests_ts ON requests (ts);
    CREATE INDEX requests_backend_ts ON requests (backend, ts)
    """


def _feedback(ident: str, real: str) -> str:
    return f"""
    CREATE TABLE IF NOT EXISTS feedback (
        id {ident},
        ts {real} NOT NULL,
        request TEXT NOT NULL,            -- the request log's id, or a trace id
        verdict TEXT,                     -- good | bad (user feedback)
        source TEXT NOT NULL,             -- user | consortium
        prompt TEXT,                      -- consortium preferences carry their own labels
        local {real},
        hosted {real}
    )
    """


_LEARNING = """
CREATE TABLE IF NOT EXISTS learn_labels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    boundary INTEGER NOT NULL,
    source TEXT NOT NULL,             -- shadow | feedback | consortium
    ref TEXT NOT NULL UNIQUE,
    prompt TEXT NOT NULL,
    local REAL NOT NULL,
    hosted REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS learn_labels_boundary ON learn_labels (boundary, id);
CREATE TABLE IF NOT EXISTS learn_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    parent INTEGER NOT NULL,          -- the version in use when this one was adopted
    boundary INTEGER NOT NULL,        -- the boundary whose weights changed
    weights TEXT NOT NULL,            -- JSON: a complexity weights file
    seen INTEGER NOT NULL,            -- fitted on this boundary's labels with id <= seen
    heads TEXT NOT NULL,              -- JSON: boundary -> version whose weights it uses
    summary TEXT NOT NULL             -- JSON: the adaptation's figures
);
CREATE TABLE IF NOT EXISTS learn_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS learn_spend (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    day TEXT NOT NULL,                -- UTC, YYYY-MM-DD: the budget is per UTC day
    usd REAL NOT NULL,
    calls INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS learn_spend_day ON learn_spend (day);
"""

_SQLITE_ID, _PG_ID = "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
_PG_REAL = "DOUBLE PRECISION"
_WHO = """
    ALTER TABLE requests ADD COLUMN key_name TEXT;
    ALTER TABLE feedback ADD COLUMN giver TEXT;
    CREATE INDEX IF NOT EXISTS feedback_request ON feedback (request);
    CREATE INDEX requests_trace ON requests (trace_id) WHERE trace_id IS NOT NULL
"""

_SESSION_INDEX = "CREATE INDEX IF NOT EXISTS requests_session ON requests (session, id) WHERE session IS NOT NULL"

STEPS: tuple[Step, ...] = (
    Step("the request log, and (locally) the learned latency",
         sqlite=_requests(_SQLITE_ID, "REAL", "INTEGER", "INTEGER") + """;
    CREATE TABLE latency_state (
        backend TEXT PRIMARY KEY,
        state TEXT NOT NULL,              -- JSON owned by policies.latency
        updated REAL NOT NULL
    )""",
         postgres=_requests(_PG_ID, _PG_REAL, "BIGINT", "SMALLINT")),
    Step("the model's thinking, apart from the answer; NULL unless log.store_thinking is true",
         sqlite="ALTER TABLE requests ADD COLUMN thinking TEXT",
         postgres="ALTER TABLE requests ADD COLUMN thinking TEXT"),
    # Versions before this step created `feedback` outside the migrations (SQLite only): IF NOT EXISTS.
    Step("feedback: users' verdicts and consortium preferences, the labels calibration learns from",
         sqlite=_feedback(_SQLITE_ID, "REAL"), postgres=_feedback(_PG_ID, _PG_REAL)),
    Step("who asked and who judged: the client key's name on requests and verdicts (never the key)",
         sqlite=_WHO, postgres=_WHO),
    Step("spend per minute, what the spend cap reads; filled from the requests logged so far",
         sqlite="""
    CREATE TABLE spend (minute INTEGER PRIMARY KEY, cost_usd REAL NOT NULL);
    INSERT INTO spend (minute, cost_usd)
        SELECT CAST(ts / 60 AS INTEGER), SUM(cost_usd) FROM requests WHERE cost_usd IS NOT NULL GROUP BY 1
    """,
         postgres="""
    CREATE TABLE spend (minute BIGINT PRIMARY KEY, cost_usd DOUBLE PRECISION NOT NULL);
    INSERT INTO spend (minute, cost_usd)
        SELECT floor(ts / 60)::bigint, SUM(cost_usd) FROM requests WHERE cost_usd IS NOT NULL GROUP BY 1
    """),
    Step("spool replays: how many lines of each local spool file the database already holds",
         postgres="CREATE TABLE spool_replayed (spool TEXT PRIMARY KEY, upto BIGINT NOT NULL)"),
    Step("what the provider's prompt cache served and stored of each request, and the session it belongs to",
         sqlite=_CACHE_AND_SESSION.format(integer="INTEGER"), postgres=_CACHE_AND_SESSION.format(integer="BIGINT")),
    # A fleet learns through Redis (router/learning/fleet.py): PostgreSQL holds no learning tables.
    Step("what routing learned from its traffic: labels, adopted weight versions, shadow judging's spend",
         sqlite=_LEARNING),
    Step("whose labels: the client key behind a feedback label, whether the operator stands behind it, and the "
         "keys whose labels refits no longer read",
         sqlite="""
    ALTER TABLE learn_labels ADD COLUMN giver TEXT;
    ALTER TABLE learn_labels ADD COLUMN trusted INTEGER NOT NULL DEFAULT 1;
    CREATE TABLE learn_quarantine (giver TEXT PRIMARY KEY, ts REAL NOT NULL, reason TEXT NOT NULL)
    """),
    Step("a session's requests found by its id: `route --continue` and `route log --cid` read a conversation's turns",
         sqlite=_SESSION_INDEX, postgres=_SESSION_INDEX),
)

SCHEMA_VERSION = len(STEPS)


def statements(dialect: Dialect, version: int) -> list[tuple[int, list[str]]]:
    """(step number, its statements) for each step from `version` to SCHEMA_VERSION."""
    return [(n + 1, STEPS[n].sql(dialect)) for n in range(version, SCHEMA_VERSION)]
