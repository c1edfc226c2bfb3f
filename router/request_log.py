"""The request log: one `RequestRecord` per routed request, appended to the local Store.

The Router registers `RequestLog.observe` as a request observer (see `attach_request_log`), so
the CLI, the Python API and the server all log the same way. Observing costs one queue put on the
caller's thread; turning the Outcome into a record and writing it happen on one background
writer thread per database file, in batches (one transaction per batch), so the event loop never
waits on SQLite. The writer thread starts on the first record and ends after a few idle seconds;
`flush()` waits for everything queued so far, and pending records are flushed at exit.

Prompts (the last user turn) and answers are stored unless `log.store_content` is false. API keys
never are: a record is built only from the routing decision and the completion.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.types import last_user_text
from router.decision import Outcome
from router.store import RequestRecord, Store, default_store_path

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["RequestLog", "attach_request_log", "record_from"]

_LOG = logging.getLogger(__name__)
_ERROR_CHARS = 2000  # an error message longer than this is cut; bodies can be huge
_IDLE_EXIT_S = 3.0  # the writer thread ends after this long without records
_BATCH_MAX = 1000


def record_from(outcome: Outcome, *, store_content: bool = True, ended_at: float | None = None) -> RequestRecord:
    """The RequestRecord for one finished request. Pure: no I/O."""
    decision = outcome.decision
    result, error = outcome.result, outcome.error
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
    if result is not None:
        c = result.completion
        if result.failures:
            info["fallbacks"] = [{"backend": e.backend, "error": type(e).__name__} for e in result.failures]
        trace = c.metadata.get("trace")
        fields.update(
            status="ok", backend=c.backend, model=c.model,
            trace_id=c.metadata.get("trace_id") or (trace.get("id") if isinstance(trace, dict) else None),
            input_tokens=c.usage.input_tokens, output_tokens=c.usage.output_tokens, cost_usd=c.cost_usd,
            ttft_s=c.timings.ttft_s, total_s=c.timings.total_s, decode_tps=c.timings.decode_tps,
            answer=c.text if store_content else None, simulated=bool(c.metadata.get("simulated")),
        )
    else:
        failures = getattr(error, "exceptions", None) or ()
        last = failures[-1] if failures else error
        cancelled = isinstance(error, asyncio.CancelledError)
        if failures:
            info["failures"] = [{"backend": getattr(e, "backend", None), "error": type(e).__name__} for e in failures]
        fields.update(
            status="cancelled" if cancelled else "error",
            backend=getattr(last, "backend", None) or decision.chosen,
            error_type=type(error).__name__,
            error=(str(error) or ("the client went away" if cancelled else type(error).__name__))[:_ERROR_CHARS],
            total_s=outcome.elapsed_s,
        )
    return RequestRecord(**fields)


class _Writer:
    """The one background writer for one database file in this process."""

    def __init__(self, path: Path):
        self.path = path
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._queued = 0  # records handed in; guarded by _lock
        self._settled = 0  # records written or dropped; guarded by _lock
        self.dropped = 0

    def put(self, item: tuple[Outcome, bool, float]) -> None:
        self._queue.put(item)
        with self._lock:
            self._queued += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"route-log-{self.path.name}", daemon=True)
                self._thread.start()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every record queued before this call is written; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            target = self._queued
            while self._settled < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._done.wait(remaining):
                    return self._settled >= target
        return True

    def _run(self) -> None:
        store: Store | None = None
        try:
            while True:
                try:
                    first = self._queue.get(timeout=_IDLE_EXIT_S)
                except queue.Empty:
                    with self._lock:
                        if self._queue.empty():
                            self._thread = None  # the next put starts a new thread
                            return
                    continue
                batch = [first]
                while len(batch) < _BATCH_MAX:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                store = store or self._open()
                self._write(store, batch)
        finally:
            if store is not None:
                store.close()

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
            self._settled += len(batch)
            self._done.notify_all()


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
