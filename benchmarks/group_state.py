"""What one rate-limit take costs in each way the workers of `route serve --workers N` could share
their buckets without Redis -- the measurement behind router/state/group_table.py.

    python benchmarks/group_state.py [--takes 20000]

Each way, a take reads one bucket pair, takes from it and writes it back, atomically across
processes:

- in process        the buckets of one process (`RateLimiter`): the floor, shared with no one
- group table       a mapped file under an flock (`GroupRateLimiter`): what `--workers` uses
- SQLite            a write transaction (BEGIN IMMEDIATE, read, update, commit) on a WAL file in
                    a temporary directory, synchronous=NORMAL: the local store's way
- state process     a round trip over a Unix socket to a process that owns the buckets: a small
                    state service in the supervisor

Alone (one process taking) and contended (two processes taking at once, each timed), in µs per
take, with the ratio to the group table measured in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable
from typing import Any

from policies.rate_limit import Buckets, RateLimits
from router.state.group import GroupRateLimiter
from router.state.group_table import GroupTable
from router.state.rate_limits import RateLimiter

LIMITS = RateLimits(rpm=1e12, tpm=1e15)  # never refuses: every take does the whole work
NOW = 1_000.0


def _in_process(_: str) -> Callable[[], object]:
    limiter = RateLimiter({("backend", "a"): LIMITS}, clock=lambda: NOW)
    return lambda: limiter._take_here("backend", "a", 10)


def _group(directory: str) -> Callable[[], object]:
    table = GroupTable(os.path.join(directory, "group.table"), [("backend", "a")])
    limiter = GroupRateLimiter({("backend", "a"): LIMITS}, table, clock=lambda: NOW)
    return lambda: limiter._take_here("backend", "a", 10)


def _sqlite(directory: str) -> Callable[[], object]:
    db = sqlite3.connect(os.path.join(directory, "state.db"), isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS b (k TEXT PRIMARY KEY, rl REAL, ra REAL, tl REAL, ta REAL)")
    db.execute("INSERT OR IGNORE INTO b VALUES ('a', NULL, NULL, NULL, NULL)")
    buckets = Buckets(LIMITS, NOW)

    def take() -> object:
        db.execute("BEGIN IMMEDIATE")
        row = db.execute("SELECT rl, ra, tl, ta FROM b WHERE k = 'a'").fetchone()
        assert buckets.rpm is not None and buckets.tpm is not None
        if row[0] is not None:
            buckets.rpm.level, buckets.rpm.at, buckets.tpm.level, buckets.tpm.at = row
        refused = buckets.take(10, NOW)
        db.execute("UPDATE b SET rl = ?, ra = ?, tl = ?, ta = ? WHERE k = 'a'",
                   (buckets.rpm.level, buckets.rpm.at, buckets.tpm.level, buckets.tpm.at))
        db.execute("COMMIT")
        return refused

    return take


_REQUEST = struct.Struct("=d")


def _serve_state(path: str, ready: Any) -> None:
    """The state process: one thread per client, the buckets behind one lock (as a supervisor's
    service would hold them)."""
    import threading

    buckets, lock = Buckets(LIMITS, NOW), threading.Lock()
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)
    ready.set()

    def client(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(_REQUEST.size):
                with lock:
                    refused = buckets.take(_REQUEST.unpack(data)[0], NOW)
                conn.sendall(b"0" if refused is None else b"1")

    while True:
        conn, _ = server.accept()
        threading.Thread(target=client, args=(conn,), daemon=True).start()


def _state_process(directory: str) -> Callable[[], object]:
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(os.path.join(directory, "state.sock"))

    def take() -> object:
        conn.sendall(_REQUEST.pack(10.0))
        return conn.recv(1)

    return take


WAYS: dict[str, Callable[[str], Callable[[], object]]] = {
    "in process": _in_process, "group table": _group, "SQLite": _sqlite, "state process": _state_process}


def _timed(way: str, directory: str, takes: int, go: Any = None, out: Any = None) -> float:
    take = WAYS[way](directory)
    take()  # connect, open, warm up
    if go is not None:
        go.wait()
    started = time.perf_counter()
    for _ in range(takes):
        take()
    seconds = (time.perf_counter() - started) / takes
    if out is not None:
        out.put(seconds)
    return seconds


def _contended(way: str, directory: str, takes: int) -> float:
    context = multiprocessing.get_context("spawn")
    go, out = context.Barrier(3), context.Queue()
    procs = [context.Process(target=_timed, args=(way, directory, takes, go, out)) for _ in range(2)]
    for proc in procs:
        proc.start()
    go.wait()
    results = [out.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join()
    return max(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--takes", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        context = multiprocessing.get_context("spawn")
        ready = context.Event()
        service = context.Process(target=_serve_state, args=(os.path.join(directory, "state.sock"), ready), daemon=True)
        service.start()
        ready.wait(timeout=60)
        figures = {way: (_timed(way, directory, args.takes), None if way == "in process"
                         else _contended(way, directory, args.takes)) for way in WAYS}
        service.kill()
    base_alone, base_contended = figures["group table"]
    print(f"µs per rate-limit take, {args.takes} takes (contended: two processes at once, the slower's figure); "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"  {'':16s} {'alone':>8s} {'x group':>8s} {'contended':>10s} {'x group':>8s}")
    for way, (alone, contended) in figures.items():
        both = (f"{contended * 1e6:10.2f} {contended / (base_contended or 1):8.2f}" if contended is not None
                else f"{'-':>10s} {'-':>8s}")
        print(f"  {way:16s} {alone * 1e6:8.2f} {alone / base_alone:8.2f} {both}")


if __name__ == "__main__":
    main()
