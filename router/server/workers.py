"""`route serve --workers N`: N processes answering on one port, one event loop (one core) each,
and the supervisor that keeps N of them running.

The parent binds the port (so a busy port, or port 0, is settled before anything starts), then
starts N `router.serving` processes, each building its own Router from the same config.
On Linux each worker gets its own SO_REUSEPORT socket and the kernel spreads connections
evenly; elsewhere they share one socket. The parent keeps every socket open, so a dead worker's
connections wait in its socket's queue for the worker that replaces it, rather than failing.

One state for the group without Redis: rate-limit buckets and breaker verdicts live in a table
the parent names and every worker maps (router/state/group.py), so `rpm: 60` is 60 a minute for
the server, not per worker; learned latency is shared through the local store. With `state:
backend: redis`, Redis shares all of it instead. Metrics add up across workers: the parent makes
a PROMETHEUS_MULTIPROC_DIR for the workers' counters (router/server/metrics.py).

A worker that dies after it started serving (killed, crashed) is replaced at once, while the
others go on serving: what it had in flight is lost, nothing else. One that dies before it
served (a config broken since, a start that fails) would die again: the parent stops the others
and exits non-zero, saying so, as it does when workers keep dying (more than `_MAX_RESTARTS` in
a minute).

SIGINT or SIGTERM to the parent: SIGTERM to every worker, which drains its streams and stops;
a second SIGINT forces them. The workers run in sessions of their own, so only the parent's
signal reaches them, once. The parent removes the metrics and state directories at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from types import FrameType

from backends.errors import RouteError
from backends.threaded_server import bind_socket
from router.server.worker import ServeSpec

__all__ = ["listening_sockets", "supervise"]

_BACKLOG = 2048  # uvicorn's default
_POLL_S = 0.05  # how often the parent looks at its workers: a dead one is replaced within this
_MAX_RESTARTS = 10  # in any minute; more means something kills every worker, and replacing is futile


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


class _Worker:
    """One worker process, the socket it serves and the pipe on which it says it is ready."""

    def __init__(self, spec: ServeSpec, sock: socket.socket, metrics_dir: str):
        self.sock = sock
        ready_read, ready_write = os.pipe()
        os.set_blocking(ready_read, False)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "router.serving"], stdin=subprocess.PIPE,
                                         env=env, pass_fds=(sock.fileno(), ready_write), start_new_session=True)
        except BaseException:
            os.close(ready_read)
            raise
        finally:
            os.close(ready_write)  # the worker holds the only writing end: its death ends the pipe
        self._ready_pipe: int | None = ready_read
        self.ready = False
        assert self.proc.stdin is not None
        spec = dataclasses.replace(spec, fd=sock.fileno(), ready_fd=ready_write)
        self.proc.stdin.write((spec.to_json() + "\n").encode())
        self.proc.stdin.flush()  # the pipe stays open: its end tells the worker the parent is gone

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        """The exit status once it has ended (None while it runs); notes whether it got ready."""
        if self._ready_pipe is not None:
            try:
                said = os.read(self._ready_pipe, 1)
            except BlockingIOError:
                said = None
            if said is not None:  # b"1": ready; b"": the worker went without saying so
                self.ready = self.ready or said == b"1"
                os.close(self._ready_pipe)
                self._ready_pipe = None
        return self.proc.poll()

    def how(self) -> str:
        code = self.proc.returncode
        return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"

    def close(self) -> None:
        if self._ready_pipe is not None:
            os.close(self._ready_pipe)
            self._ready_pipe = None
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()


def _stop(workers: list[_Worker], signals: _Signals, grace_s: float) -> None:
    """SIGTERM to each worker; SIGINT (force) on a second interrupt; SIGKILL past `grace_s`."""
    procs = [worker.proc for worker in workers]
    _signal_running(procs, signal.SIGTERM)
    seen, forced = len(signals.received), False
    deadline = time.monotonic() + grace_s
    while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
        if not forced and signal.SIGINT in signals.received[seen:]:
            forced = True
            _signal_running(procs, signal.SIGINT)  # after SIGTERM, uvicorn takes it as: stop now
        time.sleep(_POLL_S)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _signal_running(procs: list[subprocess.Popen], sig: int) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(sig)


class _Supervisor:
    def __init__(self, spec: ServeSpec, metrics_dir: str):
        self.spec, self.metrics_dir = spec, metrics_dir
        self.workers: list[_Worker] = []
        self.retired: list[_Worker] = []  # dead and replaced: their metrics are marked at the end too
        self._restarts: deque[float] = deque()  # time.monotonic() of each replacement in the last minute

    def start(self, sock: socket.socket) -> None:
        self.workers.append(_Worker(self.spec, sock, self.metrics_dir))

    def watch(self, signals: _Signals) -> str | None:
        """Replace dead workers until a signal comes (None) or replacing is futile (why)."""
        while not signals.received:
            for index, worker in enumerate(self.workers):
                if worker.poll() is None:
                    continue
                problem = self._replace(index, worker)
                if problem is not None:
                    return problem
            time.sleep(_POLL_S)
        return None

    def _replace(self, index: int, dead: _Worker) -> str | None:
        from prometheus_client import multiprocess

        if not dead.ready:
            return (f"route serve: worker {dead.pid} {dead.how()} before it served (its output, if any, is "
                    "above); the other workers were stopped. Fix what it reported and start again.")
        now = time.monotonic()
        while self._restarts and now - self._restarts[0] > 60.0:
            self._restarts.popleft()
        if len(self._restarts) >= _MAX_RESTARTS:
            return (f"route serve: worker {dead.pid} {dead.how()}, the {_MAX_RESTARTS + 1}th worker to die within a "
                    "minute; the others were stopped. See what kills them (memory? `dmesg`), and start again.")
        self._restarts.append(now)
        dead.close()
        multiprocess.mark_process_dead(dead.pid, self.metrics_dir)  # its live gauges leave /metrics
        self.retired.append(dead)
        self.workers[index] = _Worker(self.spec, dead.sock, self.metrics_dir)
        print(f"route serve: worker {dead.pid} {dead.how()}; worker {self.workers[index].pid} replaces it "
              "(the others kept serving)", file=sys.stderr, flush=True)
        return None


def supervise(spec: ServeSpec, sockets: list[socket.socket], workers: int) -> None:
    """Keep `workers` worker processes serving on `sockets` until a signal, or until replacing
    dead workers is futile (RouteError)."""
    from prometheus_client import multiprocess

    metrics_dir = tempfile.mkdtemp(prefix="route-metrics-")
    state_dir = tempfile.mkdtemp(prefix="route-state-")  # 0700: the table is the group's alone
    spec = dataclasses.replace(spec, group_state=os.path.join(state_dir, "group.table"))
    signals = _Signals()
    supervisor = _Supervisor(spec, metrics_dir)
    problem: str | None = None
    try:
        for i in range(workers):
            supervisor.start(sockets[i % len(sockets)])
        problem = supervisor.watch(signals)
    finally:
        for sock in sockets:
            sock.close()  # no new connections queue for workers about to stop
        _stop(supervisor.workers, signals, spec.drain_s + 5.0)
        for worker in [*supervisor.workers, *supervisor.retired]:
            multiprocess.mark_process_dead(worker.pid, metrics_dir)
            worker.close()
        signals.restore()
        shutil.rmtree(metrics_dir, ignore_errors=True)
        shutil.rmtree(state_dir, ignore_errors=True)
    if problem is not None:
        raise RouteError(problem)
