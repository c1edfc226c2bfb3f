"""The request log in PostgreSQL, against a real server started per session
(tests/postgres_server.py): replicas in separate processes lose no record, `route log` and
`route stats` read it, the server going away mid-run costs no request and no record within the
buffer, a frozen server costs one timeout and a warning rather than stalled requests, with
`flush_interval_ms: 0` an acknowledged request is recorded through an outage and a SIGKILL (the
local spool), migrations run once however many replicas start together, feedback lands in the
same database, `route doctor` checks it, and the DSN's password never appears anywhere."""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
import yaml
from typer.testing import CliRunner

from router.cli.app import app
from router.config_loader import load_config
from router.core import Router
from router.store import RequestRecord, row_for
from router.store.postgres import SCHEMA_VERSION, PgStore
from router.store.request_log import RequestLog
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.integration


def _config(sim, **log):
    return {
        "backends": {"fast": {"kind": "openai", "model": "m-fast", "base_url": sim.base_url, "max_retries": 0,
                              "price": {"input": 1.0, "output": 2.0}}},
        "routing": {"tiers": [{"name": "only", "backends": ["fast"]}]},
        "log": {"backend": "postgres", "dsn": "${ROUTE_PG_DSN}", **log},
    }


def _write(tmp_path, config) -> str:
    path = tmp_path / "route.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _prompts(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [row[0] for row in conn.execute("SELECT prompt FROM requests ORDER BY id")]


def _replica(config: dict, dsn: str, worker: int, count: int, start_at: float) -> None:
    """One replica: its own process, Router and RequestLog; `count` requests through the simulator."""
    os.environ["ROUTE_PG_DSN"] = dsn

    async def run(router: Router) -> None:
        slots = asyncio.Semaphore(8)

        async def one(seq: int) -> None:
            async with slots:
                await router.acomplete(f"{worker}:{seq}")

        await asyncio.gather(*(one(seq) for seq in range(count)))
        await router.aclose()

    router = Router(load_config(config), source="server")
    while time.time() < start_at:
        time.sleep(0.001)
    asyncio.run(run(router))
    assert router.request_log is not None
    assert router.request_log.flush(timeout_s=120)
    assert router.request_log.dropped == 0


@pytest.mark.slow
def test_four_replicas_a_thousand_requests_each_lose_none_and_route_log_reads_them(sim, pg_dsn, tmp_path):
    config = _config(sim)
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 3  # all four write at once
    procs = [ctx.Process(target=_replica, args=(config, pg_dsn, w, 1000, start_at)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=600)
    assert [proc.exitcode for proc in procs] == [0] * 4
    prompts = _prompts(pg_dsn)
    assert len(prompts) == 4000 and set(prompts) == {f"{w}:{s}" for w in range(4) for s in range(1000)}

    runner = CliRunner()
    config_file = _write(tmp_path, config)
    shown = runner.invoke(app, ["log", "--json", "-n", "5000", "-c", config_file])
    assert shown.exit_code == 0, shown.output
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    assert len(records) == 4000 and {r["status"] for r in records} == {"ok"}
    assert records[0]["decision"]["chosen"] == "fast" and records[0]["simulated"] is True
    one = runner.invoke(app, ["log", "show", str(records[0]["id"]), "--json", "-c", config_file])
    assert one.exit_code == 0 and json.loads(one.stdout)["prompt"] == records[0]["prompt"]
    stats = runner.invoke(app, ["stats", "--json", "--since", "1h", "-c", config_file])
    assert stats.exit_code == 0, stats.output
    [fast] = json.loads(stats.stdout)["backends"]
    assert (fast["backend"], fast["requests"], fast["errors"]) == ("fast", 4000, 0)
    assert json.loads(stats.stdout)["total_cost_usd"] > 0


def _migrate(dsn: str, start_at: float) -> None:
    while time.time() < start_at:
        time.sleep(0.001)
    PgStore(dsn).close()


def test_migrations_run_once_when_two_replicas_start_together(pg_dsn, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 2
    procs = [ctx.Process(target=_migrate, args=(pg_dsn, start_at)) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0]
    PgStore(pg_dsn).close()  # and a third, later: nothing left to do
    with psycopg.connect(pg_dsn) as conn:
        assert [row[0] for row in conn.execute("SELECT version FROM schema_version")] == list(range(1, SCHEMA_VERSION + 1))
        columns = [row[0] for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'requests' ORDER BY ordinal_position")]
    from router.store import Store

    Store(tmp_path / "route.db").close()
    with sqlite3.connect(tmp_path / "route.db") as conn:
        assert columns == [row[1] for row in conn.execute("PRAGMA table_info(requests)")]  # the same columns


def test_postgres_going_away_mid_run_costs_no_request_and_the_kept_records_follow(sim, tmp_path, monkeypatch, caplog):
    """The server stops after 40 requests; 150 more are answered while it is down, of which the
    newest 120 (log.buffer_records) are kept; once it is back they are all written."""
    with PostgresServer() as server:
        dsn = server.create_database()
        monkeypatch.setenv("ROUTE_PG_DSN", dsn)
        with Router(load_config(_config(sim, buffer_records=120)), source="api") as router:
            log = router.request_log
            assert log is not None and server.password not in log.where
            for i in range(40):
                router.complete(f"before {i}")
            assert log.flush(timeout_s=60)
            server.stop()
            with caplog.at_level(logging.WARNING, logger="router.request_log"):
                answers = [router.complete(f"during {i}") for i in range(150)]
                assert all(a.text for a in answers)  # every request answered while the database was down
                assert not log.flush(timeout_s=60)  # tried, and it is down: the records stay queued
                assert log.dropped == 30
                server.start()
                assert log.flush(timeout_s=60)
            assert _prompts(dsn) == [f"before {i}" for i in range(40)] + [f"during {i}" for i in range(30, 150)]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot be reached" in m for m in messages) == 1
    assert sum("dropping the oldest" in m for m in messages) == 1
    assert any("answers again" in m for m in messages)
    assert not any(server.password in m for m in messages)


def test_a_row_postgres_refuses_is_left_out_of_its_batch_alone(pg_dsn):
    store = PgStore(pg_dsn)
    good = [row_for(RequestRecord(source="api", status="ok", prompt=f"p{i}")) for i in range(4)]
    bad = list(good[0])
    bad[1] = None  # status: NOT NULL
    assert [i for i, _ in store.log_rows([*good[:2], tuple(bad), *good[2:]])] == [2]
    odd = row_for(RequestRecord(source="api", status="ok", prompt="nul \x00 inside"))
    assert store.log_rows([odd]) == []  # PostgreSQL text cannot hold NUL; the rest of it is kept
    assert [r["prompt"] for r in store.recent(10)] == ["nul \ufffd inside", "p3", "p2", "p1", "p0"]
    store.close()


def test_the_log_reads_an_unreachable_server_as_one_paragraph_without_the_password(sim, tmp_path, monkeypatch):
    server_password = "hunter2-not-in-any-output"
    monkeypatch.setenv("ROUTE_PG_DSN", f"postgresql://route:{server_password}@127.0.0.1:1/route")
    config_file = _write(tmp_path, _config(sim))
    for args in (["log"], ["stats"]):
        result = CliRunner().invoke(app, [*args, "-c", config_file])
        assert result.exit_code == 2
        assert "cannot be reached" in result.output and "Traceback" not in result.output
        assert server_password not in result.output and "postgresql://route@127.0.0.1:1/route" in result.output


def test_the_dsn_must_name_a_variable_when_it_holds_a_password(sim, tmp_path, monkeypatch):
    config = _config(sim)
    config["log"]["dsn"] = "postgresql://route:s3cret-pw@db.internal/route"
    result = CliRunner().invoke(app, ["log", "-c", _write(tmp_path, config)])
    assert result.exit_code == 2 and "${ROUTE_PG_DSN}" in result.output and "s3cret-pw" not in result.output
    config["log"]["dsn"] = "host=db.internal dbname=route"  # no password here (libpq finds it elsewhere): fine
    assert load_config(config).config.log.dsn == "host=db.internal dbname=route"
    monkeypatch.delenv("ROUTE_PG_DSN", raising=False)
    unset = CliRunner().invoke(app, ["log", "-c", _write(tmp_path, _config(sim))])
    assert unset.exit_code == 2 and "ROUTE_PG_DSN" in unset.output and "not set" in unset.output
    with pytest.raises(Exception, match="needs dsn"):
        load_config({**_config(sim), "log": {"backend": "postgres"}})


def test_postgres_without_the_driver_says_how_to_install_it(sim, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "psycopg", None)  # as if the extra were not installed
    monkeypatch.setenv("ROUTE_PG_DSN", "postgresql://route@127.0.0.1:1/route")
    config_file = _write(tmp_path, _config(sim))
    result = CliRunner().invoke(app, ["log", "-c", config_file])
    assert result.exit_code == 2 and "pip install 'latency-router[postgres]'" in result.output
    with pytest.raises(Exception, match=r"latency-router\[postgres\]"):
        Router(load_config(_config(sim)))


def test_a_request_log_on_postgres_names_the_server_without_the_password(pg_dsn, postgres):
    log = RequestLog(dsn=pg_dsn)
    assert postgres.password not in log.where and log.where.startswith("postgresql://route@127.0.0.1:")


def _rescue(server: PostgresServer, after_s: float = 120.0) -> tuple[threading.Timer, threading.Event]:
    """Thaws a frozen server should the code under test hang on it (so a failure is a failed
    assertion, not a hung run); `fired` says whether it had to."""
    fired = threading.Event()

    def thaw() -> None:
        fired.set()
        server.thaw()

    timer = threading.Timer(after_s, thaw)
    timer.daemon = True
    timer.start()
    return timer, fired


def test_a_frozen_postgres_costs_one_timeout_and_a_warning_not_a_stall_per_request(sim, monkeypatch, caplog):
    """`flush_interval_ms: 0` with the database frozen (SIGSTOP): the request that finds it waits
    out `log.timeout_ms` once; the rest are answered at once, their records spooled locally, and
    all of them reach the database, in order, once it answers again."""
    with PostgresServer() as server:
        dsn = server.create_database()
        monkeypatch.setenv("ROUTE_PG_DSN", dsn)
        with Router(load_config(_config(sim, flush_interval_ms=0, timeout_ms=1000)), source="api") as router:
            router.complete("before")
            server.freeze()
            timer, fired = _rescue(server)
            try:
                with caplog.at_level(logging.WARNING, logger="router.request_log"):
                    answers = [router.complete(f"frozen {i}").text for i in range(5)]
                assert not fired.is_set(), "requests waited for the frozen database"
            finally:
                timer.cancel()
                server.thaw()
            assert all(answers)
            assert router.request_log.flush(timeout_s=60)
        assert _prompts(dsn) == ["before", *(f"frozen {i}" for i in range(5))]
    warned = [r.getMessage() for r in caplog.records if "did not answer within 1.0 s" in r.getMessage()]
    assert len(warned) == 1 and server.password not in warned[0], [r.getMessage() for r in caplog.records]


def test_a_frozen_postgres_is_named_in_a_warning_and_the_records_wait_for_it(sim, monkeypatch, caplog):
    """At the default interval the writer, not the request, meets the frozen database: it gives
    up after `log.timeout_ms` with a warning, keeps the records, and writes them once thawed."""
    with PostgresServer() as server:
        dsn = server.create_database()
        monkeypatch.setenv("ROUTE_PG_DSN", dsn)
        with Router(load_config(_config(sim, timeout_ms=1000)), source="api") as router:
            router.complete("before")
            assert router.request_log.flush(timeout_s=60)
            server.freeze()
            timer, fired = _rescue(server)
            try:
                with caplog.at_level(logging.WARNING, logger="router.request_log"):
                    for i in range(3):
                        router.complete(f"frozen {i}")
                    assert not router.request_log.flush(timeout_s=60)  # tried, timed out: kept
                assert not fired.is_set(), "the writer waited for the frozen database"
            finally:
                timer.cancel()
                server.thaw()
            assert router.request_log.flush(timeout_s=60)
        assert _prompts(dsn) == ["before", "frozen 0", "frozen 1", "frozen 2"]
    assert sum("did not answer within 1.0 s" in r.getMessage() for r in caplog.records) == 1


_ACKNOWLEDGING_CHILD = """
import sys
from router.config_loader import load_config
from router.core import Router

router = Router(load_config(sys.argv[1]), source="api")
for i in range(int(sys.argv[2])):
    router.complete(f"during {i}")
    print(i, flush=True)  # acknowledged
sys.stdin.read()  # until killed
"""


def test_acknowledged_means_recorded_through_an_outage_and_a_sigkill(sim, tmp_path, route_home):
    """`flush_interval_ms: 0`, the database stopped: every acknowledged request's record is in the
    local spool (fsynced) before the answer; the process is then SIGKILLed, and the next process
    to log replays the spool, in order, before its own records."""
    count = 30
    with PostgresServer() as server:
        dsn = server.create_database()
        server.stop()
        config = _write(tmp_path, _config(sim, flush_interval_ms=0))
        env = {**os.environ, "ROUTE_HOME": str(route_home), "ROUTE_PG_DSN": dsn,
               "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        child = subprocess.Popen([sys.executable, "-c", _ACKNOWLEDGING_CHILD, config, str(count)], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            acknowledged = [int(child.stdout.readline()) for _ in range(count)]
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        assert acknowledged == list(range(count)), child.stderr.read()
        server.start()
        os.environ["ROUTE_PG_DSN"] = dsn
        try:
            with Router(load_config(config), source="api") as router:
                router.complete("after")
                assert router.request_log.flush(timeout_s=60)
        finally:
            del os.environ["ROUTE_PG_DSN"]
        assert _prompts(dsn) == [*(f"during {i}" for i in range(count)), "after"]


def test_feedback_with_a_postgres_log_is_kept_in_postgres(sim, pg_dsn, route_home):
    with Router(load_config(_config(sim)), source="api") as router:
        router.complete("judge me")
        assert router.request_log.flush(timeout_s=60)
        [logged] = PgStore(pg_dsn).recent(1)
        router.feedback(logged["id"], "bad")
    with psycopg.connect(pg_dsn) as conn:
        rows = list(conn.execute("SELECT request, verdict FROM feedback"))
    assert rows == [(str(logged["id"]), "bad")]
    assert not list(route_home.rglob("*.db"))  # nothing went to a local file


def test_route_doctor_checks_the_log_database(sim, pg_dsn, tmp_path, monkeypatch):
    config_file = _write(tmp_path, _config(sim))
    ok = CliRunner().invoke(app, ["doctor", "--json", "-c", config_file])
    [log] = [c for c in json.loads(ok.stdout)["checks"] if c["name"] == "request log"]
    assert log["ok"] and "postgresql://route@127.0.0.1:" in log["detail"], log
    password = "hunter2-not-in-any-output"
    monkeypatch.setenv("ROUTE_PG_DSN", f"postgresql://route:{password}@127.0.0.1:1/route")
    down = CliRunner().invoke(app, ["doctor", "--json", "-c", config_file])
    assert down.exit_code == 3
    [log] = [c for c in json.loads(down.stdout)["checks"] if c["name"] == "request log"]
    assert not log["ok"] and "cannot be reached" in log["detail"] and password not in down.output


def test_a_replay_cut_short_resumes_where_it_stopped_and_writes_nothing_twice(pg_dsn, tmp_path):
    """A process replayed the first batch of a spool (rows and progress in one transaction) and
    died; the next process to log replays the rest, once, before its own record."""
    from router.store.spool import Spool
    from tests.helpers import ok_outcome

    left = Spool(tmp_path / "spool")
    left.append([row_for(RequestRecord(source="api", status="ok", prompt=f"spooled {i}")) for i in range(5)])
    [name] = left.names()
    _, first = next(iter(left.batches({}, size=2)))
    store = PgStore(pg_dsn)
    assert store.log_rows(first.rows, progress=(name, first.upto)) == []
    store.close()
    left.close()  # its process is gone
    log = RequestLog(dsn=pg_dsn, spool_dir=tmp_path / "spool")
    log.observe(ok_outcome("after"))
    assert log.flush(timeout_s=60)
    assert _prompts(pg_dsn) == [*(f"spooled {i}" for i in range(5)), "after"]
    assert not list((tmp_path / "spool").iterdir())  # replayed to its end: deleted
    with psycopg.connect(pg_dsn) as conn:
        assert list(conn.execute("SELECT * FROM spool_replayed")) == []


def test_route_serve_replays_a_gone_processs_spool_as_it_starts_before_any_request(sim, pg_dsn, tmp_path):
    """Issue 47: the records a killed server spooled while PostgreSQL was down reached it only
    when the restarted server logged its first request, so an idle replica held them back."""
    from router.server import RouteServer
    from router.store.choice import spool_dir_for
    from router.store.postgres import describe_dsn
    from router.store.spool import Spool
    from tests.waiting import eventually

    spool = spool_dir_for(str(tmp_path / "spool"), describe_dsn(pg_dsn))  # where a server on this config spools
    left = Spool(spool)
    left.append([row_for(RequestRecord(source="server", status="ok", prompt=f"spooled {i}")) for i in range(3)])
    left.close()  # its process is gone
    router = Router(load_config(_config(sim, spool_dir=str(tmp_path / "spool"))), source="server")

    def replayed() -> bool:
        try:
            return _prompts(pg_dsn) == [f"spooled {i}" for i in range(3)]
        except psycopg.errors.UndefinedTable:  # the log has not opened the database yet
            return False

    with RouteServer(router):  # started, and asked nothing
        assert eventually(replayed, timeout_s=60)
        assert eventually(lambda: not list(spool.iterdir()), timeout_s=60)  # replayed to its end: deleted
