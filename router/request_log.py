"""The request log: one `RequestRecord` per routed request, appended to the local Store.

The Router registers `RequestLog.observe` as a request observer (see `attach_request_log`), so
the CLI, the Python API and the server all log the same way. Observing builds and validates the
record on the caller's thread (a record that could not be written is refused there, alone, with
a warning) and appends it to a deque; writing happens on one background writer thread per
database file, which wakes every `log.flush_interval_ms` (default 200 ms) and writes what is
pending in one transaction, row by row, so one bad row never costs the others. The event loop
never waits on SQLite, unless the interval is 0: then `observe` returns only once its record is
written (synchronous, for when no acknowledged request may go unlogged).

Durability: SQLite in WAL mode with synchronous=NORMAL survives the process being killed once a
transaction has committed. So a SIGKILL loses at most the records acknowledged in the last flush
interval plus one batch write (benchmarks/log_durability.py measures it); SIGTERM and a normal
exit lose none (pending records are flushed at exit). The thread starts on the first record and
ends after a few idle seconds; `flush()` waits for everything queued so far.

Prompts (the last user turn) and answers are stored unless `log.store_content` is false, each cut
to `log.max_content_chars` with a marker giving the original size. A model's thinking is stored
only with `log.store_thinking` (default off), in its own column, cut the same way; it is never
part of the answer. API keys never are: a record is built only from the routing decision and the
completion.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.types import last_user_text
from router.decision import Outcome, RouteResult
from router.store import RequestRecord, Store, StoreError, default_store_path, row_for

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["RequestLog", "attach_request_log", "record_from"]

_LOG = logging.getLogger(__name__)
_ERROR_CHARS = 2000  # an error message longer than this is cut; bodies can be huge
DEFAULT_INTERVAL_S = 0.2  # how often the writer thread looks for records
DEFAULT_MAX_CONTENT = 100_000  # characters of a prompt or an answer kept in the log
_IDLE_EXIT_S = 3.0  # the writer thread ends after this long without records
_BATCH_MAX = 1000  # records per transaction


def bounded(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters (0 = no limit), with a marker saying how long it was."""
    if text is None or not limit or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… truncated by route: {len(text):,} characters in all, the first {limit:,} kept]"


def record_from(outcome: Outcome, *, store_content: bool = True, ended_at: float | None = None,
                max_content_chars: int = 0, store_thinking: bool = False) -> RequestRecord:
    """The RequestRecord for one finished request; prompt, answer and (with `store_thinking` and
    `store_content`) thinking cut to `max_content_chars` (0 = whole). Pure: no I/O."""
    decision = outcome.decision
    ended_at = time.time() if ended_at is None else ended_at
    info: dict[str, Any] = dict(decision.as_dict())
    info["elapsed_s"] = outcome.elapsed_s
    fields: dict[str, Any] = {
        "source": outcome.source,
        "ts": ended_at - outcome.elapsed_s,  # when the request began, unix seconds
        "requested": decision.chosen if decision.forced else "auto",
        "score": None if decision.score is None else float(decision.score.value),
        "tier": decision.tier,
        "decision": info,
        "prompt": bounded(last_user_text(outcome.messages), max_content_chars) if store_content else None,
    }
    if outcome.result is not None:
        fields.update(_answered(outcome.result, info, store_content))
        fields["answer"] = bounded(fields["answer"], max_content_chars)
        if store_content and store_thinking:
            fields["thinking"] = bounded(outcome.result.completion.thinking, max_content_chars)
    else:
        fields.update(_failed(outcome, info))
    return RequestRecord(**fields)


def _answered(result: RouteResult, info: dict[str, Any], store_content: bool) -> dict[str, Any]:
    c = result.completion
    if result.failures:
        info["fallbacks"] = [{"backend": e.backend, "error": type(e).__name__} for e in result.failures]
    downgrade = result.downgrade
    if downgrade is not None:  # read by `route stats` (per tier)
        info["downgraded"] = downgrade.as_dict()
    trace = c.metadata.get("trace")
    return dict(
        status="ok", backend=c.backend, model=c.model,
        trace_id=c.metadata.get("trace_id") or (trace.get("id") if isinstance(trace, dict) else None),
        input_tokens=c.usage.input_tokens, output_tokens=c.usage.output_tokens, cost_usd=c.cost_usd,
        ttft_s=c.timings.ttft_s, total_s=c.timings.total_s, decode_tps=c.timings.decode_tps,
        answer=c.text if store_content else None, simulated=bool(c.metadata.get("simulated")),
    )


def _failed(outcome: Outcome, info: dict[str, Any]) -> dict[str, Any]:
    error = outcome.error
    failures = getattr(error, "exceptions", None) or ()
    last = failures[-1] if failures else error
    cancelled = isinstance(error, asyncio.CancelledError)
    if failures:
        info["failures"] = [{"backend": getattr(e, "backend", None), "error": type(e).__name__} for e in failures]
    message = str(error) or ("the client went away" if cancelled else type(error).__name__)
    return dict(
        status="cancelled" if cancelled else "error",
        backend=getattr(last, "backend", None) or outcome.decision.chosen,
        error_type=type(error).__name__,
        error=message[:_ERROR_CHARS],
        total_s=outcome.elapsed_s,
    )


class _Writer:
    """The one background writer for one database file in this process.

    `put` only appends a validated row to a deque: it never wakes the writer thread, because on
    CPython a woken thread competes for the GIL with the event loop that just served the
    request. The writer wakes on its own every `interval_s` (or when flushed) and writes
    everything pending in one transaction. Problems are warned about once per kind (a full
    disk is not repeated for every batch), and counted in `dropped`."""

    def __init__(self, path: Path):
        self.path = path
        self.interval_s = DEFAULT_INTERVAL_S  # the shortest any RequestLog on this file asked for
        self._pending: deque[tuple] = deque()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy = False  # a batch is taken but not yet written; guarded by _lock
        self._warned: str | None = None  # the kind of problem last warned about
        self.dropped = 0

    def put(self, row: tuple) -> None:
        self._pending.append(row)  # atomic; the writer drains it
        if self._thread is None:  # read after the append: see _run's exit for why that order matters
            self._ensure_thread()
        if len(self._pending) >= _BATCH_MAX:
            self._wake.set()  # a burst: write now rather than hold it all in memory

    def refuse(self, exc: Exception) -> None:
        """A record that could not even be built: counted and warned about, nothing else lost."""
        self.dropped += 1
        _LOG.warning("request log: one record not written to %s: %s: %s", self.path, type(exc).__name__, exc)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"route-log-{self.path.name}", daemon=True)
                self._thread.start()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every record queued before this call is written (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout_s
        if self._pending:
            self._ensure_thread()
        with self._lock:
            while self._pending or self._busy:
                self._wake.set()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._settled.wait(min(remaining, 0.05))
        return True

    def _run(self) -> None:
        store: Store | None = None
        idle_s = 0.0
        try:
            while True:
                self._wake.wait(self.interval_s)
                self._wake.clear()
                with self._lock:
                    batch = [self._pending.popleft() for _ in range(min(len(self._pending), _BATCH_MAX))]
                    self._busy = bool(batch)
                if batch:
                    idle_s = 0.0
                    store = store or self._open()
                    store = self._write(store, batch)
                    continue
                idle_s += self.interval_s
                if idle_s >= _IDLE_EXIT_S and self._retire():
                    return
        finally:
            if store is not None:
                store.close()

    def _retire(self) -> bool:
        """End this thread unless records arrived. `_thread` is cleared before `_pending` is read,
        and `put` appends before it reads `_thread`: so either this sees the record or `put` sees
        no thread and starts one."""
        with self._lock:
            self._thread = None
            if not self._pending:
                return True
            self._thread = threading.current_thread()
            return False

    def _open(self) -> Store | None:
        try:
            return Store(self.path, check=True, repair=True)  # a damaged file is moved aside, once
        except StoreError as exc:  # the log must never take the router down
            self._warn(exc.kind, f"request log off: {exc}")
            return None

    def _write(self, store: Store | None, batch: list[tuple]) -> Store | None:
        """Write `batch`; returns the store to use next (None after a failure that needs a reopen)."""
        try:
            if store is None:
                self.dropped += len(batch)  # warned about when opening failed
                return None
            return self._insert(store, batch)
        finally:
            with self._lock:
                self._busy = False
                self._settled.notify_all()

    def _insert(self, store: Store, batch: list[tuple]) -> Store | None:
        try:
            failed = store.log_rows(batch)
        except StoreError as exc:
            self.dropped += len(batch)
            self._warn(exc.kind, f"{len(batch)} records not written: {exc}")
            if exc.kind != "damaged":
                return store  # a full disk or a lock may pass: try again with the next batch
            store.close()
            return None  # reopened with the next batch, which moves the damaged file aside
        for index, error in failed:
            self.dropped += 1
            _LOG.warning("request log: record %d of a batch not written to %s: %s", index, self.path, error)
        self._warned = None  # writing works again: a new problem deserves a new warning
        return store

    def _warn(self, kind: str, message: str) -> None:
        if kind != self._warned:
            self._warned = kind
            _LOG.warning("route: %s", message)


_writers: dict[Path, _Writer] = {}
_writers_lock = threading.Lock()


def _writer_for(path: Path) -> _Writer:
    with _writers_lock:
        writer = _writers.get(path)
        if writer is None:
            writer = _writers[path] = _Writer(path)
        return writer


@atexit.register
def _flush_all_at_exit() -> None:
    for writer in list(_writers.values()):
        writer.flush(timeout_s=10.0)


# A forked child must not share (or wait on) its parent's writer threads.
os.register_at_fork(after_in_child=_writers.clear)


class RequestLog:
    """A request observer that appends one record per routed request to a Store file.

    `flush_interval_s`: how long a record may wait before it is written; 0 writes it before
    `observe` returns. `max_content_chars`: prompt, answer and thinking are cut to this (0 = whole).
    `store_thinking`: keep the model's thinking too (with `store_content` only)."""

    def __init__(self, path: str | Path | None = None, *, store_content: bool = True,
                 max_content_chars: int = DEFAULT_MAX_CONTENT, flush_interval_s: float = DEFAULT_INTERVAL_S,
                 store_thinking: bool = False):
        self.path = Path(path).expanduser() if path else default_store_path()
        self.store_content = store_content
        self.store_thinking = store_thinking
        self.max_content_chars = max_content_chars
        self.synchronous = flush_interval_s <= 0
        self._writer = _writer_for(self.path.resolve())
        if not self.synchronous:
            self._writer.interval_s = min(self._writer.interval_s, flush_interval_s)

    def observe(self, outcome: Outcome) -> None:
        """Queue `outcome`'s record for writing; with a zero interval, write it before returning.
        A record that cannot be built or stored is refused here, alone, with a warning."""
        try:
            row = row_for(record_from(outcome, store_content=self.store_content,
                                      max_content_chars=self.max_content_chars, store_thinking=self.store_thinking))
        except Exception as exc:  # the log must never fail a request
            self._writer.refuse(exc)
            return
        self._writer.put(row)
        if self.synchronous:
            self._writer.flush()

    __call__ = observe

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every record observed so far is written (or dropped); False on timeout."""
        return self._writer.flush(timeout_s)

    @property
    def dropped(self) -> int:
        """Records that could not be written (logged as warnings)."""
        return self._writer.dropped


def attach_request_log(router: Router) -> RequestLog:
    """Register a RequestLog, configured by the router's `log:` section, as a request observer."""
    settings = router.config.log
    log = RequestLog(settings.path, store_content=settings.store_content, max_content_chars=settings.max_content_chars,
                     flush_interval_s=settings.flush_interval_ms / 1000, store_thinking=settings.store_thinking)
    router.add_request_observer(log.observe)
    return log
