"""`route serve --workers N`: N processes answering on one port, one event loop (one core) each.

The parent binds the port (so a busy port, or port 0, is settled before anything starts), then
starts N `router.server.worker` processes, each building its own Router from the same config.
On Linux each worker gets its own SO_REUSEPORT socket and the kernel spreads connections
evenly; elsewhere they share one socket. Learned latency is shared through the local store
(merged on save); breakers and budgets are each worker's own.

Metrics add up across workers: the parent makes a PROMETHEUS_MULTIPROC_DIR for the workers'
counters (router/server/metrics.py) and removes it when all have stopped.

SIGINT or SIGTERM to the parent: SIGTERM to every worker, which drains its streams and stops;
a second SIGINT forces them. A worker that dies stops the rest, and the parent exits non-zero.
The workers run in sessions of their own, so only the parent's signal reaches them, once.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from types import FrameType

from backends.errors import RouteError
from backends.threaded_server import bind_socket
from router.server.worker import ServeSpec

__all__ = ["listening_sockets", "supervise"]

_BACKLOG = 2048  # uvicorn's default
_POLL_S = 0.1


def listening_sockets(host: str, port: int, workers: int) -> list[socket.socket]:
    """One listening socket per worker on Linux (SO_REUSEPORT), else one for all."""
    first = bind_socket(host, port, reuse_port=sys.platform == "linux")
    sockets = [first]
    if sys.platform == "linux":
        bound = first.getsockname()[1]  # port 0 resolved: the others join it
        sockets += [bind_socket(host, bound, reuse_port=True) for _ in range(workers - 1)]
    for sock in sockets:
        sock.listen(_BACKLOG)  # connections queue while the workers start
    return sockets


class _Signals:
    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous = {sig: signal.signal(sig, self._on) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _on(self, sig: int, frame: FrameType | None) -> None:
        self.received.append(sig)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _start(spec: ServeSpec, sock: socket.socket, metrics_dir: str) -> subprocess.Popen:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
    proc = subprocess.Popen([sys.executable, "-m", "router.server.worker"], stdin=subprocess.PIPE, env=env,
                            pass_fds=(sock.fileno(),), start_new_session=True)
    assert proc.stdin is not None
    proc.stdin.write((dataclasses.replace(spec, fd=sock.fileno()).to_json() + "\n").encode())
    proc.stdin.flush()  # the pipe stays open: its end tells the worker the parent is gone
    return proc


def _stop(workers: list[subprocess.Popen], signals: _Signals, grace_s: float) -> None:
    """SIGTERM to each worker; SIGINT (force) on a second interrupt; SIGKILL past `grace_s`."""
    for proc in workers:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    seen, forced = len(signals.received), False
    deadline = time.monotonic() + grace_s
    while any(proc.poll() is None for proc in workers) and time.monotonic() < deadline:
        if not forced and signal.SIGINT in signals.received[seen:]:
            forced = True
            for proc in workers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)  # after SIGTERM, uvicorn takes it as: stop now
        time.sleep(_POLL_S)
    for proc in workers:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def supervise(spec: ServeSpec, sockets: list[socket.socket], workers: int) -> None:
    """Run `workers` worker processes on `sockets` until a signal or a worker's death."""
    from prometheus_client import multiprocess

    metrics_dir = tempfile.mkdtemp(prefix="route-metrics-")
    signals = _Signals()
    procs: list[subprocess.Popen] = []
    died: subprocess.Popen | None = None
    try:
        for i in range(workers):
            procs.append(_start(spec, sockets[i % len(sockets)], metrics_dir))
        for sock in sockets:
            sock.close()  # each worker holds its own: a dead worker's socket leaves the port's group
        while not signals.received and died is None:
            died = next((proc for proc in procs if proc.poll() is not None), None)
            time.sleep(_POLL_S)
    finally:
        _stop(procs, signals, spec.drain_s + 5.0)
        for proc in procs:
            multiprocess.mark_process_dead(proc.pid, metrics_dir)
            if proc.stdin is not None:
                proc.stdin.close()
        signals.restore()
        shutil.rmtree(metrics_dir, ignore_errors=True)
    if died is not None:
        how = (f"was killed by {signal.Signals(-died.returncode).name}" if died.returncode < 0
               else f"exited with code {died.returncode}")
        raise RouteError(f"route serve: worker {died.pid} {how} (its output, if any, is above); the other "
                         "workers were stopped. Fix what it reported, or see what killed it, and start again.")
