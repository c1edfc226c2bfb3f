"""The request log: one `RequestRecord` per routed request, appended to the local SQLite store
(`log.backend: sqlite`, the default) or to PostgreSQL (`log.backend: postgres`, one log for
every replica; router/store/postgres.py). Which one a config uses is decided in
router/store/choice.py.

The Router registers `RequestLog.observe` as a request observer (see `attach_request_log`), so
the CLI, the Python API and the server all log the same way. Observing copies what the record
needs from the request on the caller's thread (a request whose record cannot be made is refused
there, alone, with a warning) and appends it to a deque; the rest -- the decision rendered as
JSON, the row validated -- and the writing happen on one background writer thread per
destination (router/store/writer.py), which wakes every `log.flush_interval_ms` (default 200 ms)
and writes what is pending in one transaction; one bad row never costs the others. The event
loop never waits on the database, unless the interval is 0: then `observe` returns only once
its record is written (synchronous, for when no acknowledged request may go unlogged) -- or,
while PostgreSQL is away, fsynced to a local spool that is replayed in order once it answers
(router/store/spool.py).

Durability: SQLite in WAL mode with synchronous=NORMAL survives the process being killed once a
transaction has committed. So a SIGKILL loses at most the records acknowledged in the last flush
interval plus one batch write (benchmarks/log_durability.py measures it); SIGTERM and a normal
exit lose none (pending records are flushed at exit). PostgreSQL commits each batch likewise.
While PostgreSQL is unreachable, records wait in memory (at most `log.buffer_records`, oldest
dropped beyond that, with one warning) and are written when it answers again; requests are not
held up. A database that does not answer within `log.timeout_ms` counts as away, with a warning. The thread starts on the first record and ends after a few idle seconds; `flush()`
waits for everything queued so far.

Prompts (the last user turn) and answers are stored unless `log.store_content` is false, each cut
to `log.max_content_chars` with a marker giving the original size. A model's thinking is stored
only with `log.store_thinking` (default off), in its own column, cut the same way; it is never
part of the answer. API keys never are: a record is built only from the routing decision and the
completion; a server request's record names the client key it came with (`key_name`).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.types import last_user_text
from router.decision import Decision, Outcome, RouteResult
from router.request_context import CLIENT_KEY, CONVERSATION
from router.store import writer as log_writer
from router.store.choice import LogTarget, log_target, spool_dir_for
from router.store.records import RequestRecord, row_of
from router.store.refusals import BreakerRefusals, refused_by_breaker
from router.store.spool import Spool
from router.store.sqlite import Store, default_store_path
from router.store.writer import DEFAULT_INTERVAL_S, DEFAULT_MAX_PENDING, Writer

if TYPE_CHECKING:
    from router.config_loader import LoadedConfig

__all__ = ["RequestLog", "attach_request_log", "record_from"]

_ERROR_CHARS = 2000  # an error message longer than this is cut; bodies can be huge
DEFAULT_MAX_CONTENT = 100_000  # characters of a prompt or an answer kept in the log


def bounded(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters (0 = no limit), with a marker saying how long it was."""
    if text is None or not limit or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… truncated by route: {len(text):,} characters in all, the first {limit:,} kept]"


def record_from(outcome: Outcome, *, store_content: bool = True, ended_at: float | None = None,
                max_content_chars: int = 0, store_thinking: bool = False) -> RequestRecord:
    """The RequestRecord for one finished request; prompt, answer and (with `store_thinking` and
    `store_content`) thinking cut to `max_content_chars` (0 = whole). Pure: no I/O."""
    return _capture(outcome, store_content, ended_at, max_content_chars, store_thinking).record()


class _Captured:
    """What a record needs from a finished request, taken on the caller's thread: the prompt now
    (the caller may reuse its message list), the decision to render later (nothing changes it),
    without its task and session plan, which hold the whole conversation as the client sent it
    (the record shows the session's few fields, taken now). Records wait here for the writer thread, up to
    hundreds under load; holding agents' 200 KB conversations, they kept `route serve` tens of
    MB larger after a burst (freed, but in pymalloc arenas pinned by the longer-lived objects
    allocated beside them)."""

    __slots__ = ("decision", "extras", "fields")

    def __init__(self, fields: dict[str, Any], decision: Decision, extras: dict[str, Any]):
        self.fields = fields
        session = decision.session
        if decision.task is not None or session is not None:
            decision = decision.without_conversation()
        self.decision = decision
        # added to the decision's dict: the session, elapsed_s, fallbacks, downgraded, failures
        self.extras = extras if session is None else {"session": session.as_dict(), **extras}

    def _decision_info(self) -> dict[str, Any]:
        return {**self.decision.as_dict(), **self.extras}

    def record(self) -> RequestRecord:
        return RequestRecord(**self.fields, decision=self._decision_info())

    def row(self) -> tuple:
        return row_of({**self.fields, "decision": self._decision_info()})


def _capture(outcome: Outcome, store_content: bool, ended_at: float | None, max_content_chars: int,
             store_thinking: bool = False) -> _Captured:
    decision = outcome.decision
    ended_at = time.time() if ended_at is None else ended_at
    extras: dict[str, Any] = {"elapsed_s": outcome.elapsed_s}
    fields: dict[str, Any] = {
        "source": outcome.source,
        "ts": ended_at - outcome.elapsed_s,  # when the request began, unix seconds
        "requested": decision.chosen if decision.forced else "auto",
        "score": None if decision.score is None else float(decision.score.value),
        "tier": decision.tier,
        "prompt": bounded(last_user_text(outcome.messages), max_content_chars) if store_content else None,
        "key_name": CLIENT_KEY.get(),
        "session": decision.session.key if decision.session is not None else CONVERSATION.get(),
    }
    if outcome.result is not None:
        fields.update(_answered(outcome.result, extras, store_content))
        fields["answer"] = bounded(fields["answer"], max_content_chars)
        if store_content and store_thinking:
            fields["thinking"] = bounded(outcome.result.completion.thinking, max_content_chars)
    else:
        fields.update(_failed(outcome, extras))
    return _Captured(fields, decision, extras)


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
        cache_read_tokens=c.usage.cache_read_tokens, cache_write_tokens=c.usage.cache_write_tokens,
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


@atexit.register
def _flush_all_at_exit() -> None:
    log_writer.flush_all(timeout_s=10.0)


os.register_at_fork(after_in_child=log_writer.after_fork)


class RequestLog:
    """A request observer that appends one record per routed request to a SQLite file (`path`)
    or a PostgreSQL database (`dsn`, already expanded).

    `flush_interval_s`: how long a record may wait before it is written; 0 writes it before
    `observe` returns (spooled to `spool_dir` while PostgreSQL is away). `max_content_chars`:
    prompt, answer and thinking are cut to this (0 = whole). `store_thinking`: keep the model's
    thinking too (with `store_content` only). `buffer_records`: records held in memory while
    PostgreSQL is unreachable. `timeout_s`: how long PostgreSQL may take to answer."""

    def __init__(self, path: str | Path | None = None, *, store_content: bool = True,
                 max_content_chars: int = DEFAULT_MAX_CONTENT, flush_interval_s: float = DEFAULT_INTERVAL_S,
                 store_thinking: bool = False, dsn: str | None = None, buffer_records: int = DEFAULT_MAX_PENDING,
                 timeout_s: float | None = None, spool_dir: Path | None = None):
        self.store_content = store_content
        self.store_thinking = store_thinking
        self.max_content_chars = max_content_chars
        self.synchronous = flush_interval_s <= 0
        self.path: Path | None = None
        if dsn:
            self._writer = _postgres_writer(dsn, timeout_s, spool_dir)
            self._writer.max_pending = buffer_records
            self._writer.spill = self._writer.spill or self.synchronous
        else:
            self.path = Path(path).expanduser() if path else default_store_path()
            resolved = self.path.resolve()
            self._writer = log_writer.writer_for(("sqlite", resolved), str(resolved), lambda: _open_sqlite(resolved))
        if not self.synchronous:
            self._writer.interval_s = min(self._writer.interval_s, flush_interval_s)
        self._refusals = BreakerRefusals()

    @classmethod
    def for_target(cls, target: LogTarget, **settings: Any) -> RequestLog:
        return cls(target.path, dsn=target.dsn, timeout_s=target.timeout_s, spool_dir=target.spool_dir, **settings)

    @property
    def where(self) -> str:
        """The file, or postgresql://user@host:port/db (never the password)."""
        return self._writer.label

    def observe(self, outcome: Outcome) -> None:
        """Queue `outcome`'s record for writing; with a zero interval, write (or spool) it
        before returning. A request whose record cannot be made is refused here, alone, with a
        warning. Requests an open breaker refused are one record per key per second
        (router/store/refusals.py), written once the second is over."""
        try:
            if outcome.result is None and refused_by_breaker(outcome.error):
                self._refused(outcome)
                return
            captured = _capture(outcome, self.store_content, None, self.max_content_chars, self.store_thinking)
        except Exception as exc:  # the log must never fail a request
            self._writer.refuse(exc)
            return
        self._writer.put(captured)
        if self.synchronous:
            self._writer.secure()

    __call__ = observe

    def _refused(self, outcome: Outcome) -> None:
        aggregate = self._refusals.add(CLIENT_KEY.get(), time.time(), lambda: _capture(
            outcome, self.store_content, None, self.max_content_chars, self.store_thinking))
        if aggregate is not None:
            self._writer.put_after(aggregate, aggregate.second + 1.25)  # a late count of its second still joins it

    def replay_left(self) -> None:
        """Replay what ended processes left spooled, now (`route serve` calls it as it starts)."""
        self._writer.replay_left()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every record observed so far is written (or dropped), spooled ones
        included. False on timeout, or while PostgreSQL is unreachable (the records then stay
        queued, or spooled)."""
        return self._writer.flush(timeout_s)

    @property
    def dropped(self) -> int:
        """Records that could not be written (logged as warnings)."""
        return self._writer.dropped


def _open_sqlite(path: Path) -> Store:
    return Store(path, check=True, repair=True)  # a damaged file is moved aside, once


def _postgres_writer(dsn: str, timeout_s: float | None, spool_dir: Path | None) -> Writer:
    from router.store.postgres import DEFAULT_TIMEOUT_S, PgStore, describe_dsn, require_driver

    require_driver()
    timeout = timeout_s or DEFAULT_TIMEOUT_S
    label = describe_dsn(dsn)
    writer = log_writer.writer_for(("postgres", dsn), label, lambda: PgStore(dsn, timeout_s=timeout),
                                   keep_on=frozenset({"unreachable"}))
    if writer.spool is None:
        writer.spool = Spool(spool_dir or spool_dir_for(None, label))
    return writer


def attach_request_log(loaded: LoadedConfig, observe: Callable[[Callable[[Outcome], None]], None]) -> RequestLog:
    """A RequestLog configured by the config's `log:` section, registered with `observe` as a
    request observer."""
    settings = loaded.config.log
    log = RequestLog.for_target(log_target(loaded), store_content=settings.store_content,
                                max_content_chars=settings.max_content_chars,
                                flush_interval_s=settings.flush_interval_ms / 1000,
                                store_thinking=settings.store_thinking, buffer_records=settings.buffer_records)
    observe(log.observe)
    return log
