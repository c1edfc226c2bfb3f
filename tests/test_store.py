"""The SQLite store: schema version and migrations, the request-log queries, and several processes
writing at once without losing a record."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time

import pytest

from backends.errors import ConfigError
from router.store import SCHEMA_VERSION, RequestRecord, Store

pytestmark = pytest.mark.unit

WRITERS, PER_WRITER = 8, 1000


def _write_many(path: str, writer: int, count: int, start_at: float) -> None:
    """One process: `count` records, one transaction each (the most contended way to write)."""
    store = Store(path)
    while time.time() < start_at:  # line the processes up so their writes really overlap
        time.sleep(0.001)
    for seq in range(count):
        store.log(RequestRecord(source=f"writer-{writer}", status="ok", requested=str(seq), backend="b"))
    store.close()


@pytest.mark.integration
def test_eight_processes_writing_a_thousand_records_each_lose_none(tmp_path):
    path = str(tmp_path / "route.db")
    Store(path).close()  # created and migrated once, so the children race on writes, not on setup
    ctx = multiprocessing.get_context("spawn")  # no fork: the test process has server threads
    start_at = time.time() + 1.5
    procs = [ctx.Process(target=_write_many, args=(path, w, PER_WRITER, start_at)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * WRITERS
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT source, requested FROM requests").fetchall()
    assert len(rows) == WRITERS * PER_WRITER
    assert set(rows) == {(f"writer-{w}", str(s)) for w in range(WRITERS) for s in range(PER_WRITER)}
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_new_store_is_at_the_current_schema_version_and_reopens(tmp_path):
    path = tmp_path / "route.db"
    Store(path).log(RequestRecord(source="api", status="ok"))
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert Store(path).count() == 1


def test_a_store_written_by_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "route.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(ConfigError, match="newer version"):
        Store(path)


def test_recent_filters_and_stat_rows_window(tmp_path):
    store = Store(tmp_path / "route.db")
    now = time.time()
    store.log([
        RequestRecord(source="cli", status="ok", backend="a", ts=now - 7200, total_s=1.0, prompt="old"),
        RequestRecord(source="server", status="error", backend="b", ts=now - 60, error="boom"),
        RequestRecord(source="api", status="ok", backend="a", ts=now - 30, total_s=0.5, decision={"chosen": "a"}),
    ])
    assert [r["status"] for r in store.recent(10)] == ["ok", "error", "ok"]  # newest first
    assert [r["source"] for r in store.recent(10, backend="a")] == ["api", "cli"]
    assert [r["backend"] for r in store.recent(10, status="error")] == ["b"]
    assert store.recent(1)[0]["decision"] == {"chosen": "a"}
    recent = store.stat_rows(since_ts=now - 3600)
    assert [(r["backend"], r["status"]) for r in recent] == [("b", "error"), ("a", "ok")]
    assert "prompt" not in recent[0]  # stats never read the content columns
    assert len(store.stat_rows()) == 3


def test_a_version_1_log_gains_the_thinking_column_and_keeps_its_rows(tmp_path):
    from router.store.schema import STEPS

    path = tmp_path / "route.db"
    conn = sqlite3.connect(path)
    conn.executescript(";".join(STEPS[0].sql("sqlite")))  # the file as route wrote it before thinking could be logged
    conn.execute("INSERT INTO requests (ts, source, status, answer) VALUES (1.0, 'cli', 'ok', 'old answer')")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    store = Store(path)
    store.log(RequestRecord(source="api", status="ok", answer="new answer", thinking="a thought"))
    new, old = store.recent(2)
    assert (old["answer"], old["thinking"]) == ("old answer", None)
    assert (new["answer"], new["thinking"]) == ("new answer", "a thought")
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_version_2_log_with_feedback_made_outside_the_schema_keeps_it_and_gains_spend(tmp_path):
    """Before feedback and spend were steps of the schema, the feedback module created its table on
    its own (no user_version step): the upgrade keeps its verdicts, and fills the spend table
    from the requests already logged."""
    from router.store.schema import STEPS

    path = tmp_path / "route.db"
    conn = sqlite3.connect(path)
    conn.executescript(";".join(STEPS[0].sql("sqlite") + STEPS[1].sql("sqlite")))
    conn.executescript("""
        CREATE TABLE IF NOT EXISTS feedback (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL,
            request TEXT NOT NULL, verdict TEXT, source TEXT NOT NULL, prompt TEXT, local REAL, hosted REAL);
        INSERT INTO requests (ts, source, status, prompt, cost_usd) VALUES (120.0, 'cli', 'ok', 'p1', 0.25);
        INSERT INTO requests (ts, source, status, prompt, cost_usd) VALUES (150.0, 'cli', 'ok', 'p2', 0.5);
        INSERT INTO requests (ts, source, status, prompt, cost_usd) VALUES (600.0, 'cli', 'ok', 'p3', 1.0);
        INSERT INTO feedback (ts, request, verdict, source) VALUES (1.0, '1', 'bad', 'user');
        PRAGMA user_version=2;
    """)
    conn.close()
    store = Store(path)
    assert [(r["request"], r["verdict"], r["giver"]) for r in store.feedback_rows()] == [("1", "bad", None)]
    assert store.spent_usd(since_ts=0) == 1.75 and store.spent_usd(since_ts=200) == 1.0
    rows = sqlite3.connect(path).execute("SELECT minute, cost_usd FROM spend ORDER BY minute").fetchall()
    assert rows == [(2, 0.75), (10, 1.0)]
