"""Stores that survive damage: a damaged `route.db` is moved aside with one warning and a fresh
one started; `route log` / `route stats` on a damaged store are a clear error with exit 2; an
unusable data directory leaves the router answering with logging and learning off and one
warning; `--no-log` opens no file; a full disk is reported as a full disk and serving goes on.
Through the real CLI in subprocesses, and the real SQLite."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from router.store import RequestRecord, Store, StoreError
from router.store.request_log import RequestLog
from tests.helpers import ok_outcome
from tests.ports import free_port, wait_until_serving

pytestmark = pytest.mark.integration

ROUTE = [sys.executable, "-m", "router.cli"]
ROOT = Path(__file__).resolve().parent.parent


def route(*args: str, home: Path, timeout: float = 60):
    env = {**os.environ, "ROUTE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([*ROUTE, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False,
                          cwd=home)


def config(tmp_path: Path, sim) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(f"backends:\n  small: {{kind: openai, model: m-small, base_url: '{sim.base_url}'}}\n"
                    "routing:\n  tiers: [{name: only, backends: [small]}]\n")
    return path


def filled_store(path: Path, rows: int = 400) -> None:
    """A store with rows in it, written directly (no writer thread of this process keeps it open,
    as none would in the next process to open it)."""
    store = Store(path)
    store.log([RequestRecord(source="api", status="ok", prompt=f"prompt {i} " + "x" * 500) for i in range(rows)])
    store.close()


def garbage(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(64 * 1024))


def truncated(path: Path) -> None:
    filled_store(path)
    Store(path)._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size // 2)


def scribbled(path: Path) -> None:
    """Garbage in the middle of a valid file: the header is fine, so only a check finds it."""
    filled_store(path)
    Store(path)._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(16 * 1024))


DAMAGE = {"garbage": garbage, "truncated": truncated, "scribbled": scribbled}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", ["log", "stats"])
def test_log_and_stats_on_a_damaged_store_are_a_clear_exit_2(route_home, damage, command):
    db = route_home / "data" / "route.db"
    DAMAGE[damage](db)
    result = route(command, home=route_home)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "sqlite3" not in result.stderr
    assert str(db) in result.stderr and "damaged" in result.stderr
    assert db.exists() and not list(db.parent.glob("route.db.corrupt-*"))  # a reader leaves the file alone


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_request_on_a_damaged_store_moves_it_aside_once_and_logs_to_a_fresh_one(sim, tmp_path, route_home, damage):
    db = route_home / "data" / "route.db"
    DAMAGE[damage](db)
    result = route("-c", str(config(tmp_path, sim)), "-q", "hello", home=route_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    [aside] = [p for p in db.parent.glob("route.db.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]
    assert result.stderr.count("moved it aside") == 1 and str(aside) in result.stderr
    assert "Traceback" not in result.stderr
    rows = Store(db, check=True).recent(5)
    assert [r["prompt"] for r in rows] == ["hello"]
    again = route("log", "--json", home=route_home)
    assert again.returncode == 0 and "hello" in again.stdout


def test_the_background_writer_repairs_too(tmp_path, caplog):
    db = tmp_path / "w.db"
    scribbled(db)
    log = RequestLog(db)
    with caplog.at_level(logging.WARNING):
        log.observe(ok_outcome("after the damage"))
        assert log.flush()
    assert [r["prompt"] for r in Store(db, check=True).recent(5)] == ["after the damage"]
    assert len([r for r in caplog.records if "moved it aside" in r.getMessage()]) == 1


def test_a_store_opened_without_repair_names_the_damage(tmp_path):
    db = tmp_path / "x.db"
    scribbled(db)
    with pytest.raises(StoreError) as caught:
        Store(db, check=True)
    assert caught.value.kind == "damaged" and str(db) in str(caught.value)


# -- an unusable data directory ---------------------------------------------------------------


def _unusable(route_home: Path, how: str) -> Path:
    data = route_home / "data"
    if how == "data dir is a file":
        data.write_text("not a directory")
    else:
        if os.geteuid() == 0:
            pytest.skip("root may write to a read-only directory; the 'data dir is a file' case covers this path")
        data.mkdir()
        data.chmod(0o555)
    return data


@pytest.mark.parametrize("how", ["data dir is a file", "read-only data dir"])
def test_an_unusable_data_dir_answers_with_one_warning(sim, tmp_path, route_home, how):
    _unusable(route_home, how)
    result = route("-c", str(config(tmp_path, sim)), "hello", home=route_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() and "Traceback" not in result.stderr
    assert result.stderr.count("warning") == 1 and "request log and latency learning off" in result.stderr


@pytest.mark.parametrize("how", ["data dir is a file", "read-only data dir"])
def test_no_log_opens_no_file_and_warns_about_nothing(sim, tmp_path, route_home, how):
    data = _unusable(route_home, how)
    before = sorted(p.name for p in data.iterdir()) if data.is_dir() else None
    result = route("-c", str(config(tmp_path, sim)), "--no-log", "hello", home=route_home)
    assert result.returncode == 0 and result.stdout.strip()
    assert "warning" not in result.stderr and "Traceback" not in result.stderr
    assert (sorted(p.name for p in data.iterdir()) if data.is_dir() else None) == before



@pytest.mark.slow
@pytest.mark.parametrize("no_log", [False, True])
def test_route_serve_with_an_unusable_data_dir_serves(sim, tmp_path, route_home, no_log):
    _unusable(route_home, "data dir is a file")
    port = free_port()
    env = {**os.environ, "ROUTE_HOME": str(route_home), "PYTHONPATH": str(ROOT)}
    args = [*ROUTE, "serve", "--port", str(port), "-c", str(config(tmp_path, sim)), *(["--no-log"] if no_log else [])]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_until_serving(proc, f"http://127.0.0.1:{port}")
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=20,
                            json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
        assert answer.status_code == 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = proc.stdout.read().decode()
    assert "Traceback" not in output
    assert output.count("warning") == (0 if no_log else 1), output


# -- a full disk ---------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs: a real full disk (ENOSPC), not a simulation. Needs mount rights (root)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root): " + made.stderr.decode().strip())
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_reported_as_full_once_and_serving_goes_on(sim, small_disk, caplog):
    from router.config_loader import load_config
    from router.core import Router

    sim.update_profile("m-small", ttft_s=0.0, tokens_per_s=None)
    config = {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "only", "backends": ["small"]}]},
              "log": {"path": str(small_disk / "route.db"), "flush_interval_ms": 0}}
    with caplog.at_level(logging.WARNING), Router(load_config(config)) as router:
        answers = [router.complete("fill the disk " + "y" * 50_000).text for _ in range(80)]
        assert all(answers)  # every request answered while the log could not write
        full = [r.getMessage() for r in caplog.records if "disk is full" in r.getMessage()]
        assert len(full) == 1, [r.getMessage() for r in caplog.records]
        assert "cannot rollback" not in caplog.text
        assert router.request_log.dropped > 0
        written = Store(small_disk / "route.db").count()
        assert 0 < written < 80


def test_the_latency_state_follows_a_store_moved_aside_under_a_running_router(sim, tmp_path, caplog):
    """Damage in the middle of the file, which opening without a check does not see: the latency
    state opens it first (as `route "..."` does), then the log's writer checks it, finds the
    damage and moves it aside. The latency state, which has its own connection, must follow to
    the new file, not keep writing to (or failing on) the old one once per flush."""
    from router.config_loader import load_config
    from router.core import Router

    db = tmp_path / "route.db"
    scribbled(db)
    config = {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "only", "backends": ["small"]}]},
              "log": {"path": str(db), "flush_interval_ms": 0}}
    with caplog.at_level(logging.WARNING), Router(load_config(config), persist=True) as router:
        assert router.persist_problem is None
        for i in range(5):
            router.complete(f"after the damage {i}")
            router.latency.flush()
    assert len([p for p in tmp_path.glob("route.db.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]) == 1
    fresh = Store(db, check=True)
    assert [r["prompt"] for r in fresh.recent(10)] == [f"after the damage {i}" for i in reversed(range(5))]
    with contextlib.closing(sqlite3.connect(db)) as conn:
        identity = router.latency.identity("small")  # what the backend is: a namesake elsewhere has its own row
        assert [row[0] for row in conn.execute("SELECT backend FROM latency_state")] == [identity]
    latency = [m for m in (r.getMessage() for r in caplog.records) if "learned latency" in m or "latency history" in m]
    assert latency == []
    assert len([r for r in caplog.records if "moved it aside" in r.getMessage()]) == 1
