"""Persistence: everything route writes to disk or to a database, in one package.

    choice.py       which store a config uses -- the request log (SQLite or PostgreSQL) and the
                    learned latency (the local SQLite file) -- decided once, here
    schema.py       the one schema, as numbered steps in both dialects (add a table: add a step)
    records.py      RequestRecord and the INSERT row made from it; the client key's name
    queries.py      the log's SQL, written once: reading, spend, feedback (LogQueries)
    sqlite.py       the local SQLite file (SqliteDb) and the request log in it (Store)
    latency.py      learned latency in the local file (LatencyStore), apart from the log
    postgres.py     the request log in PostgreSQL (PgStore), with its timeouts
    request_log.py  RequestLog: the Router's observer that turns each request into a record
    writer.py       the background writer per destination, and its outage handling
    spool.py        the fsynced local spool that carries records through a PostgreSQL outage
    feedback.py     verdicts and consortium preferences, and who may give them
    spend.py        the spend cap, enforced on the Router's path
    stats.py        per-backend figures for `route stats` (pure)
    health.py       what went wrong with a store, named (StoreError); damaged files moved aside
    files.py        files 0600, directories 0700

Importing this package opens nothing and imports no driver.
"""

from __future__ import annotations

from router.store.choice import latency_store_for, local_path, local_store_usable, log_target, open_log, store_for
from router.store.health import StoreError
from router.store.latency import LatencyStore
from router.store.records import COLUMNS, RequestRecord, row_for
from router.store.schema import SCHEMA_VERSION
from router.store.sqlite import Store, default_store_path

__all__ = ["COLUMNS", "SCHEMA_VERSION", "LatencyStore", "RequestRecord", "Store", "StoreError", "default_store_path",
           "latency_store_for", "local_path", "local_store_usable", "log_target", "open_log", "row_for", "store_for"]
