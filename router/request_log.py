"""The request log: one `RequestRecord` per routed request, appended to the local Store.

The Router registers `RequestLog.observe` as a request observer (see `attach_request_log`), so
the CLI, the Python API and the server all log the same way. Observing costs one deque append on
the caller's thread; turning Outcomes into records and writing them happen on one background
writer thread per database file, which wakes every 0.2 s and writes what is pending in one
transaction, so the event loop never waits on SQLite (nor on the GIL for a woken thread). The
thread starts on the first record and ends after a few idle seconds; `flush()` waits for
everything queued so far, and pending records are flushed at exit.

Prompts (the last user turn) and answers are stored unless `log.store_content` is false. API keys
never are: a record is built only from the routing decision and the completion.
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
from router.store import RequestRecord, Store, default_store_path

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["RequestLog", "attach_request_log", "record_from"]

_LOG = logging.getLogger(__name__)
_ERROR_CHARS = 2000  # an error message longer than this is cut; bodies can be huge
_INTERVAL_S = 0.2  # how often the writer thread looks for records
_IDLE_EXIT_S = 3.0  # the writer thread ends after this long without records
_BATCH_MAX = 1000  # records per transaction


def record_from(outcome: Outcome, *, store_content: bool = True, ended_at: float | None = None) -> RequestRecord:
    """The RequestRecord for one finished request. Pure: no I/O."""
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
        "prompt": last_user_text(outcome.messages) if store_content else None,
    }
    if outcome.result is not None:
        fields.update(_answered(outcome.result, info, store_content))
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

    `put` only appends to a deque: it never wakes the writer thread, because on CPython a woken
    thread competes for the GIL with the event loop that just served the request. The writer
    wakes on its own every `_INTERVAL_S` (or when flushed) and writes everything pending in one
    transaction."""

    def __init__(self, path: Path):
        self.path = path
        self._pending: deque[tuple[Outcome, bool, float]] = deque()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy = False  # a batch is taken but not yet written; guarded by _lock
        self.dropped = 0

    def put(self, item: tuple[Outcome, bool, float]) -> None:
        self._pending.append(item)  # atomic; the writer drains it
        if self._thread is None:  # read after the append: see _run's exit for why that order matters
            self._ensure_thread()
        if len(self._pending) >= _BATCH_MAX:
            self._wake.set()  # a burst: write now rather than hold it all in memory

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
                self._wake.wait(_INTERVAL_S)
                self._wake.clear()
                with self._lock:
                    batch = [self._pending.popleft() for _ in range(min(len(self._pending), _BATCH_MAX))]
                    self._busy = bool(batch)
                if batch:
                    idle_s = 0.0
                    store = store or self._open()
                    self._write(store, batch)
                    continue
                idle_s += _INTERVAL_S
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
            return Store(self.path)
        except Exception as exc:  # the log must never take the router down
            _LOG.warning("request log: cannot open %s: %s", self.path, exc)
            return None

    def _write(self, store: Store | None, batch: list[tuple[Outcome, bool, float]]) -> None:
        try:
            if store is None:
                raise RuntimeError("store unavailable")
            store.log([record_from(o, store_content=content, ended_at=at) for o, content, at in batch])
        except Exception as exc:
            self.dropped += len(batch)
            _LOG.warning("request log: %d records not written to %s: %s", len(batch), self.path, exc)
        with self._lock:
            self._busy = False
            self._settled.notify_all()


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
    """A request observer that appends one record per routed request to a Store file."""

    def __init__(self, path: str | Path | None = None, *, store_content: bool = True):
        self.path = Path(path).expanduser() if path else default_store_path()
        self.store_content = store_content
        self._writer = _writer_for(self.path.resolve())

    def observe(self, outcome: Outcome) -> None:
        """Queue `outcome` for writing. Never blocks on I/O."""
        self._writer.put((outcome, self.store_content, time.time()))

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
    log = RequestLog(settings.path, store_content=settings.store_content)
    router.add_request_observer(log.observe)
    return log
