"""The request log's background writer: one thread per destination (a SQLite file, a PostgreSQL
database) in this process, fed by `RequestLog.observe` through a deque.

The event loop only appends: `put` never wakes the thread (a woken thread competes for the GIL
with the loop that just served the request). The thread wakes every `interval_s` (or when
flushed, or on a burst of `_BURST` records), turns what is pending into rows -- the part of
a record that costs CPU, done here rather than on the loop, handing the GIL back after each
millisecond of it -- and writes them in one transaction.

Where the destination is a server (`keep_on` names the failures that mean "down, try again"),
records it could not take stay queued, at most `max_pending` of them (the oldest are dropped
beyond that, counted, one warning), and are written once it answers again; it is retried every
`_RETRY_S`, or at once when flushed. Other failures drop the batch, counted in `dropped`, one
warning per kind of problem.

With a `spool` (router/store/spool.py) and `spill` on (`flush_interval_ms: 0` on PostgreSQL),
`secure` -- what a synchronous log calls before answering -- writes to the database while it
answers and, while it does not, appends the records to the spool, fsynced, without waiting for
it again. The thread replays the spool, in order, before any newer record, retrying every
`_RETRY_S`; so does a later process, for a spool whose process is gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from backends.errors import RouteError
from router.store.health import StoreError
from router.store.spool import Spool

__all__ = ["DEFAULT_INTERVAL_S", "DEFAULT_MAX_PENDING", "Pending", "Writer", "after_fork", "flush_all", "writer_for"]

_LOG = logging.getLogger("router.request_log")
DEFAULT_INTERVAL_S = 0.2  # how often the writer thread looks for records
DEFAULT_MAX_PENDING = 10_000  # records held while the destination is down
_IDLE_EXIT_S = 3.0  # the writer thread ends after this long without records
_BATCH_MAX = 1000  # records per transaction
_BURST = 256  # records queued that wake the writer before its interval: what they hold is memory
_RETRY_S = 2.0  # while the destination is down, try it this often
# The writer's work between two hand-backs of the GIL (seconds). Handing it back after every
# record, it could take it again only when a busy loop let go (at most every 5 ms switch
# interval): at 1,000 requests a second the queue held up to 2,700 records.
_SLICE_S = 0.001


class Pending(Protocol):
    """A record queued on the event loop, made into its INSERT row by the writer thread."""

    def row(self) -> tuple: ...


class Target(Protocol):
    """An open destination: the SQLite Store or a PgStore (which alone has a spool)."""

    def log_rows(self, rows: list[tuple]) -> list[tuple[int, Exception]]: ...

    def close(self) -> None: ...


class Writer:
    """The one background writer for one destination in this process. `label` names it in
    warnings (never with a password); `opener` connects (raising StoreError)."""

    def __init__(self, label: str, opener: Callable[[], Target], *, keep_on: frozenset[str] = frozenset()):
        self.label = label
        self._opener = opener
        self._keep_on = keep_on
        self.interval_s = DEFAULT_INTERVAL_S  # the shortest any RequestLog on this destination asked for
        self.max_pending = DEFAULT_MAX_PENDING
        self.spool: Spool | None = None  # a server destination's local spool
        self.spill = False  # spool while the destination is down (a synchronous log asked for it)
        self._pending: deque[Pending | tuple] = deque()  # built rows are tuples: kept from a failed write
        self._later: deque[tuple[float, Pending]] = deque()  # (unix time it is due, record), oldest first
        self._later_lock = threading.Lock()  # the thread and a flush both take from it
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy = False  # a batch is taken but not yet written; guarded by _lock
        self._warned: str | None = None  # the kind of problem last warned about
        self._down_at: float | None = None  # monotonic: when a keep_on failure last happened, while down
        self._overflowed = 0  # records dropped for room during this outage
        self._spool_failed = False  # the spool could not be written: warned once
        self.dropped = 0

    def put(self, item: Pending) -> None:
        if len(self._pending) >= self.max_pending:
            self._make_room(incoming=1)
        self._pending.append(item)  # atomic; the writer drains it
        if self._thread is None:  # read after the append: see _retire for why that order matters
            self._ensure_thread()
        if len(self._pending) >= _BURST and self._down_at is None:
            self._wake.set()  # a burst: write now rather than hold it all in memory

    def put_after(self, item: Pending, due: float) -> None:
        """Queue `item` once `due` (unix seconds) has passed: a record that still counts what
        arrives until then (router/store/refusals.py). Dues come in order."""
        self._later.append((due, item))
        if self._thread is None:  # after the append, as in `put`
            self._ensure_thread()

    def _take_due(self, everything: bool = False) -> None:
        now = time.time()
        due = []
        with self._later_lock:
            later = self._later
            while later and (everything or later[0][0] <= now):
                due.append(later.popleft()[1])
        for item in due:
            self.put(item)

    def refuse(self, exc: Exception) -> None:
        """A record that could not be built: counted and warned about, nothing else lost."""
        self.dropped += 1
        _LOG.warning("request log: one record not written to %s: %s: %s", self.label, type(exc).__name__, exc)

    def _make_room(self, incoming: int) -> None:
        """Drop the oldest records so that `incoming` more fit within `max_pending`."""
        with self._lock:
            extra = len(self._pending) + incoming - self.max_pending
            for _ in range(max(0, extra)):
                self._pending.popleft()
            if extra <= 0:
                return
            self.dropped += extra
            self._overflowed += extra
            if self._overflowed == extra:  # the first of this outage
                _LOG.warning("route: request log: %d records are waiting for %s, the most log.buffer_records "
                             "allows; dropping the oldest (counted; one warning per outage)", self.max_pending,
                             self.label)

    def replay_left(self) -> None:
        """Replay now what processes that ended left in the spool, rather than with this one's
        first record: an idle replica would otherwise hold them back from the database."""
        if self.spool is not None:
            self._ensure_thread()  # the thread claims and replays them first; it ends when idle

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"route-log-{self.label}", daemon=True)
                self._thread.start()

    def _backlog(self) -> bool:
        return self.spool is not None and self.spool.backlog

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every record queued before this call is written (or dropped), spooled
        ones included. False on timeout, or when the destination is down: its records then stay
        queued (or spooled)."""
        started = time.monotonic()
        deadline = started + timeout_s
        self._take_due(everything=True)  # what was observed so far, its count as it stands
        if self._pending or self._backlog():
            self._ensure_thread()
        with self._lock:
            while self._pending or self._busy or self._backlog():
                if self._down_at is not None and self._down_at > started:
                    # Tried since this call began, and the destination is down: the records stay
                    # queued (a batch still in flight is a retry of theirs, and goes back first).
                    return False
                self._wake.set()  # write now rather than at the next interval (or retry, once)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._settled.wait(min(remaining, 0.05))
        return True

    def secure(self, timeout_s: float = 10.0) -> bool:
        """What a synchronous log calls before its request is answered: True once every record
        queued so far is written or, with `spill` while the destination is down, fsynced to the
        spool. While it is down the database is not waited for again: the thread retries it."""
        if self.spool is None or not self.spill:
            return self.flush(timeout_s)
        with self._lock:
            if self._down_at is not None or self.spool.backlog:
                return self._spill()
        if self.flush(timeout_s):
            return True
        with self._lock:
            return self._spill() if self._down_at is not None else False

    def _spill(self) -> bool:
        """Move every pending record to the spool (the caller holds `_lock`), oldest first."""
        assert self.spool is not None
        while self._busy:  # a batch in flight may come back to the queue: it goes first
            self._settled.wait(0.05)
        rows = self._rows([self._pending.popleft() for _ in range(len(self._pending))])
        try:
            self.spool.append(rows)
        except OSError as exc:
            self._pending.extendleft(reversed(rows))
            if not self._spool_failed:
                self._spool_failed = True
                _LOG.warning("route: request log: cannot spool to %s (%s); while %s is away, acknowledged records "
                             "wait in memory only and a killed process loses them. Set log.spool_dir to a writable "
                             "directory.", self.spool.directory, exc, self.label)
            return False
        self._spool_failed = False
        return True

    def _after_fork(self) -> None:
        """In a forked child (`route serve --workers`): no writer thread came along, and the
        parent writes what was queued before the fork; start afresh, keeping this object, which
        the child's RequestLogs hold. The parent's spool files stay the parent's."""
        self._pending = deque()
        self._later = deque()
        self._later_lock = threading.Lock()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._thread = None
        self._busy = False
        if self.spool is not None:
            self.spool = self.spool.forked()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _run(self) -> None:
        target: Target | None = None
        idle_s = 0.0
        self._claim_orphans()
        try:
            while True:
                self._wait_for_work()
                if self._backlog():  # spooled records go before any newer one
                    idle_s = 0.0
                    target = self._replay(target)
                    if self._backlog():
                        continue
                batch = self._take_batch()
                if batch:
                    idle_s = 0.0
                    target = self._write(target, batch)
                    continue
                idle_s += self.interval_s
                if idle_s >= _IDLE_EXIT_S and self._retire():
                    return
        finally:
            if target is not None:
                target.close()

    def _wait_for_work(self) -> None:
        """Sleep until woken or the interval passes (the shorter retry interval while the target
        is down), then move deferred records whose time has come into the queue."""
        self._wake.wait(_RETRY_S if self._down_at is not None else self.interval_s)
        self._wake.clear()
        if self._later:
            self._take_due()

    def _take_batch(self) -> list[Pending | tuple]:
        """Up to _BATCH_MAX queued records, marked busy under the lock so a flush waits for them."""
        with self._lock:
            batch = [self._pending.popleft() for _ in range(min(len(self._pending), _BATCH_MAX))]
            self._busy = bool(batch)
        return batch

    def _claim_orphans(self) -> None:
        if self.spool is None:
            return
        try:
            found = self.spool.claim_orphans()
        except OSError as exc:
            _LOG.warning("route: request log: cannot read the spool %s: %s", self.spool.directory, exc)
            return
        if found:
            _LOG.warning("route: request log: %d spool files left by processes that ended are being replayed to %s",
                         found, self.label)

    def _retire(self) -> bool:
        """End this thread unless records arrived. `_thread` is cleared before `_pending` is read,
        and `put` appends before it reads `_thread`: so either this sees the record or `put` sees
        no thread and starts one."""
        with self._lock:
            self._thread = None
            if not self._pending and not self._later and not self._backlog():
                return True
            self._thread = threading.current_thread()
            return False

    def _rows(self, batch: list[Pending | tuple]) -> list[tuple]:
        rows = []
        clock = time.perf_counter
        due = clock() + _SLICE_S
        for item in batch:
            if isinstance(item, tuple):
                rows.append(item)
                continue
            try:
                rows.append(item.row())
            except Exception as exc:  # the log must never fail a request, nor lose its neighbours
                self.refuse(exc)
            if clock() >= due:
                # Give the GIL back after a slice of work: the event loop, if it is waiting
                # for it, gets it now rather than after CPython's 5 ms switch interval.
                time.sleep(0)
                due = clock() + _SLICE_S
        return rows

    def _write(self, target: Target | None, batch: list[Pending | tuple]) -> Target | None:
        """Write `batch`; returns the target to use next (None: reopen with the next batch)."""
        try:
            rows = self._rows(batch)
            if target is None:
                target = self._open()
            failed = target.log_rows(rows)
        except StoreError as exc:
            return self._failed(target, rows, exc)
        finally:
            with self._lock:
                self._busy = False
                self._settled.notify_all()
        self._count_refused(failed)
        self._recovered()
        if len(self._pending) >= _BATCH_MAX:
            self._wake.set()  # a backlog (a burst, or records kept through an outage): keep draining
        return target

    def _replay(self, target: Any) -> Any:
        """Write the spool to the database, oldest file first, each batch with its progress;
        delete what was replayed to its end. Returns the target to use next."""
        spool = self.spool
        assert spool is not None
        try:
            if target is None:
                target = self._open()
            self._replay_batches(target, {name: target.replayed(name) for name in spool.names()})
            with self._lock:  # the tail spilled meanwhile, with spilling held off: then it is drained
                self._replay_batches(target, {})
                done = spool.finish()
                if not spool.backlog:
                    self._recovered()
            for name in done:
                target.forget(name)
        except StoreError as exc:
            with self._lock:
                self._down_at = time.monotonic()
                self._wake.clear()
            self._warn(exc.kind, f"{exc} ({spool.waiting} records spooled in {spool.directory}, replayed in order "
                                 "once it answers)")
            if target is not None:
                target.close()
            return None
        return target

    def _replay_batches(self, target: Any, replayed: dict[str, int]) -> None:
        assert self.spool is not None
        for spool_file, batch in self.spool.batches(replayed, _BATCH_MAX):
            self._count_refused(target.log_rows(batch.rows, progress=(batch.name, batch.upto)))
            spool_file.replayed = batch.upto

    def _count_refused(self, failed: list[tuple[int, Exception]]) -> None:
        for index, error in failed:
            self.dropped += 1
            _LOG.warning("request log: record %d of a batch not written to %s: %s", index, self.label, error)

    def _open(self) -> Target:
        try:
            return self._opener()
        except StoreError:
            raise
        except RouteError as exc:  # a database written by a newer route, say: the log is off, the router runs
            raise StoreError("failed", str(exc)) from None

    def _failed(self, target: Target | None, rows: list[tuple], exc: StoreError) -> Target | None:
        if exc.kind in self._keep_on:  # down: keep the records, in order, ahead of newer ones
            with self._lock:
                self._pending.extendleft(reversed(rows))
                self._down_at = time.monotonic()
                self._wake.clear()  # flushes that asked before this failure get their answer: retry later
            if len(self._pending) > self.max_pending:
                self._make_room(incoming=0)  # the batch is back in the queue: nothing more to add
            self._warn(exc.kind, f"{exc} ({len(self._pending)} records waiting)")
        else:
            self.dropped += len(rows)
            self._warn(exc.kind, f"request log: {len(rows)} records not written: {exc}")
            if exc.kind not in ("damaged", "failed"):
                return target  # a full disk or a lock may pass: try again with the next batch
        if target is not None:
            target.close()
        return None  # reopened with the next batch (a damaged SQLite file is then moved aside)

    def _recovered(self) -> None:
        if self._down_at is not None:
            _LOG.warning("route: request log: %s answers again; the records kept meanwhile are being written "
                         "(%d dropped for room)", self.label, self._overflowed)
        self._down_at = None
        self._overflowed = 0
        self._warned = None  # writing works again: a new problem deserves a new warning

    def _warn(self, kind: str, message: str) -> None:
        if kind != self._warned:
            self._warned = kind
            _LOG.warning("route: %s", message)


_writers: dict[Hashable, Writer] = {}
_writers_lock = threading.Lock()


def writer_for(key: Hashable, label: str, opener: Callable[[], Any], *,
               keep_on: frozenset[str] = frozenset()) -> Writer:
    """The process's one Writer for the destination `key`, made on first use."""
    with _writers_lock:
        writer = _writers.get(key)
        if writer is None:
            writer = _writers[key] = Writer(label, opener, keep_on=keep_on)
        return writer


def flush_all(timeout_s: float = 10.0) -> None:
    """Flush every writer (at exit); say what could not be written."""
    for writer in list(_writers.values()):
        if writer.flush(timeout_s=timeout_s):
            continue
        if writer.pending:
            _LOG.warning("route: request log: %d records not written to %s at exit", writer.pending, writer.label)
        if writer.spool is not None and writer.spool.waiting:
            _LOG.warning("route: request log: %d records stay spooled in %s; the next process logging to %s "
                         "replays them", writer.spool.waiting, writer.spool.directory, writer.label)


def after_fork() -> None:
    """A forked child must not share (or wait on) its parent's writer threads."""
    global _writers_lock
    _writers_lock = threading.Lock()
    for writer in _writers.values():
        writer._after_fork()
