"""The attempt loop: try a decision's candidates in order within one overall deadline.

    for each candidate (breaker permitting):
        call it with the time that is left          -> success: done
        if a hedge is planned and it has shown no first content by its p95 to first content,
        start the next candidate too; the first to finish wins, the other is cancelled
        failure or timeout                          -> record it, next candidate
    candidates skipped by an open breaker are tried last, if time is left
    nothing worked                                  -> AllBackendsFailed (an exception group)

A hedged call runs each backend's stream in its own task ("lane") feeding one queue; the loser's
task is cancelled and its stream closed through `aclosing`, so no task or connection outlives
the request. Streaming callers commit to the first lane that yields text: switching models after
text reached the caller would garble the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from backends.base import Backend
from backends.errors import AllBackendsFailed, BackendError, BackendTimeout, BadRequest, MalformedResponse
from backends.retry import Deadline
from backends.types import Chunk, Completion, FinalChunk, Request, TextChunk
from policies.breaker import BreakerBoard
from router.decision import Attempt, Decision, RouteResult

__all__ = ["Executor"]

Notify = Callable[[Attempt], None]


class _Lane:
    """One backend's stream, pumped by a task into the race's shared queue."""

    def __init__(self, name: str, backend: Backend, request: Request, queue: asyncio.Queue):
        self.name = name
        self.started = time.perf_counter()
        self.first_text_at: float | None = None
        self.buffer: list[Chunk] = []  # chunks held back until this lane is committed to
        self.task = asyncio.create_task(self._pump(backend, request, queue), name=f"route-lane-{name}")

    async def _pump(self, backend: Backend, request: Request, queue: asyncio.Queue) -> None:
        try:
            async with contextlib.aclosing(backend.stream(request)) as chunks:
                async for chunk in chunks:
                    queue.put_nowait((self, chunk))
            queue.put_nowait((self, MalformedResponse("stream ended without a final completion",
                                                      backend=self.name)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the consumer, which decides what it means
            queue.put_nowait((self, exc))

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    async def cancel(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class Executor:
    """Runs a Decision: fallbacks, breakers, the overall deadline and optional hedging."""

    def __init__(self, backend: Callable[[str], Backend], notify: Notify, *, breakers: BreakerBoard | None = None,
                 hedge: bool = False):
        self._backend = backend
        self._notify = notify
        self._breakers = breakers
        self._hedge = hedge

    # -- bookkeeping ----------------------------------------------------------------------

    def _allow(self, name: str) -> bool:
        return self._breakers is None or self._breakers[name].allow()

    def _verdict(self, name: str, error: BackendError | None, elapsed: float, p95: Mapping[str, float]) -> None:
        if self._breakers is None:
            return
        breaker = self._breakers[name]
        if error is None:
            breaker.record_success()
        elif isinstance(error, BadRequest):
            breaker.release()  # the request's fault, not the backend's
        elif isinstance(error, BackendTimeout) and elapsed < p95.get(name, 0.0):
            breaker.release()  # cut short by a tight overall deadline: no evidence against it
        else:
            breaker.record_failure()

    def _report(self, name: str, elapsed: float, *, completion: Completion | None = None,
                error: BackendError | None = None, streamed: bool = False, cancelled: bool = False,
                p95: Mapping[str, float] | None = None) -> None:
        if cancelled:
            if self._breakers is not None:
                self._breakers[name].release()
        else:
            self._verdict(name, error, elapsed, p95 or {})
        self._notify(Attempt(name, elapsed, completion=completion, error=error, streamed=streamed,
                             cancelled=cancelled))

    # -- public ---------------------------------------------------------------------------

    async def complete(self, decision: Decision, request: Request) -> RouteResult:
        """The first successful completion, or AllBackendsFailed."""
        completion: Completion | None = None
        failures: list[BackendError] = []
        async for chunk in self._run(decision, request, failures, streaming=False):
            if isinstance(chunk, FinalChunk):
                completion = chunk.completion
        if completion is None:  # pragma: no cover - _run raises instead
            raise AllBackendsFailed(_failure_summary(decision), failures)
        return RouteResult(completion, decision, tuple(failures))

    async def stream(self, decision: Decision, request: Request,
                     on_result: Callable[[RouteResult], None]) -> AsyncIterator[Chunk]:
        """Chunks of the one backend that answered; `on_result` gets the RouteResult before the
        FinalChunk is yielded."""
        failures: list[BackendError] = []
        async for chunk in self._run(decision, request, failures, streaming=True):
            if isinstance(chunk, FinalChunk):
                on_result(RouteResult(chunk.completion, decision, tuple(failures)))
            yield chunk

    # -- the loop -------------------------------------------------------------------------

    async def _run(self, decision: Decision, request: Request, failures: list[BackendError], *,
                   streaming: bool) -> AsyncIterator[Chunk]:
        deadline = Deadline(decision.deadline_s)
        hedges = (decision.details or {}).get("hedge_after_s", {}) if self._hedge else {}
        p95 = {c["backend"]: c["p95_s"] for c in (decision.details or {}).get("candidates", ())}
        skipped: list[str] = []
        queue = list(decision.candidates)
        last_resort = False
        while queue or (skipped and not last_resort):
            if not queue:  # every remaining candidate was behind an open breaker: try them anyway
                queue, skipped, last_resort = skipped, [], True
            name = queue.pop(0)
            if deadline.expired():
                failures.append(BackendTimeout("the request's deadline passed before this backend could be tried",
                                               backend=name))
                break
            if not last_resort and not self._allow(name):
                skipped.append(name)
                continue
            backup = queue[0] if queue and name in hedges and not last_resort else None
            if backup is None and not streaming:
                completion = await self._call(name, request, deadline, failures, p95)
                if completion is not None:
                    yield FinalChunk(completion)
                    return
                continue
            started: list[str] = []
            race = self._race(name, backup, hedges.get(name), request, deadline, failures, p95, started, streaming)
            async with contextlib.aclosing(race) as chunks:
                done = False
                async for chunk in chunks:
                    done = done or isinstance(chunk, FinalChunk)
                    if streaming or isinstance(chunk, FinalChunk):
                        yield chunk
                if done:
                    return
            if backup in started:
                queue.remove(backup)  # it ran (and failed) as the hedge: not again
        raise AllBackendsFailed(_failure_summary(decision), failures)

    async def _call(self, name: str, request: Request, deadline: Deadline, failures: list[BackendError],
                    p95: Mapping[str, float]) -> Completion | None:
        """One plain (non-streamed) call with the time that is left."""
        remaining = deadline.remaining()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(remaining):  # a guard for backends that overrun their timeout
                completion = await self._backend(name).complete(
                    request.with_options(timeout_s=remaining) if remaining is not None else request)
        except TimeoutError:
            error: BackendError = BackendTimeout("no answer within the request's deadline", backend=name)
        except BackendError as exc:
            error = exc
        else:
            self._report(name, time.perf_counter() - started, completion=completion)
            return completion
        failures.append(error)
        self._report(name, time.perf_counter() - started, error=error, p95=p95)
        return None

    @staticmethod
    def _hedge_due(primary: _Lane, hedge_after_s: float | None, p95: Mapping[str, float], streaming: bool) -> float | None:
        """Seconds after the primary started at which to start the backup: its p95 to first
        content while none has come; for a plain call, also its p95 to the end, so a backend whose
        first token is on time but whose decoding has slowed down is hedged too."""
        if primary.first_text_at is None:
            return hedge_after_s
        return None if streaming else p95.get(primary.name)

    async def _race(self, name: str, backup: str | None, hedge_after_s: float | None, request: Request,
                    deadline: Deadline, failures: list[BackendError], p95: Mapping[str, float],
                    started: list[str], streaming: bool) -> AsyncIterator[Chunk]:
        """Stream `name`; start `backup` if `name` shows no text by `hedge_after_s` (appending it to
        `started`). A streaming caller commits to the first lane that yields text; a plain call
        takes whichever lane finishes first. Yields the committed lane's chunks; returns without
        a FinalChunk when every lane failed."""
        remaining = deadline.remaining()
        lane_request = request.with_options(timeout_s=remaining) if remaining is not None else request
        queue: asyncio.Queue = asyncio.Queue()
        lanes = [_Lane(name, self._backend(name), lane_request, queue)]
        # The backup must start by then to still meet the deadline at its own p95.
        latest_backup_s = None if remaining is None or backup not in p95 else remaining - p95[backup]
        committed: _Lane | None = None
        try:
            while lanes:
                wait = deadline.remaining()
                due = self._hedge_due(lanes[0], hedge_after_s, p95, streaming) if backup and not committed else None
                if due is not None and latest_backup_s is not None:
                    due = min(due, max(0.0, latest_backup_s))
                if due is not None:
                    hedge_in = max(0.0, due - lanes[0].elapsed)
                    wait = hedge_in if wait is None else min(wait, hedge_in)
                try:
                    async with asyncio.timeout(wait):
                        lane, item = await queue.get()
                except TimeoutError:
                    if deadline.expired():
                        for lane in lanes:
                            error = BackendTimeout("no answer within the request's deadline", backend=lane.name)
                            failures.append(error)
                            self._report(lane.name, lane.elapsed, error=error, streamed=True, p95=p95)
                        return  # `finally` cancels the lanes
                    if self._allow(backup):
                        remaining = deadline.remaining()
                        backup_request = request.with_options(timeout_s=remaining) if remaining is not None else request
                        lanes.append(_Lane(backup, self._backend(backup), backup_request, queue))
                        started.append(backup)
                    backup = None
                    continue
                if lane not in lanes:
                    continue  # a late item from a lane already dropped
                if isinstance(item, BaseException):
                    lanes.remove(lane)
                    if not isinstance(item, BackendError):
                        raise item
                    self._report(lane.name, lane.elapsed, error=item, streamed=True, p95=p95)
                    if lane is committed:
                        raise item  # text already reached the caller; no fallback now
                    failures.append(item)
                    if not lanes and backup is not None:
                        return  # the primary failed before the hedge was due: next candidate, normally
                    continue
                if committed is None and isinstance(item, (TextChunk, FinalChunk) if streaming else FinalChunk):
                    committed = lane
                    for loser in [other for other in lanes if other is not lane]:
                        lanes.remove(loser)
                        await loser.cancel()
                        self._report(loser.name, loser.elapsed, cancelled=True, streamed=True,
                                     error=BackendTimeout("cancelled: another backend answered first (hedge)",
                                                          backend=loser.name))
                    backup = None
                    for held in lane.buffer:
                        yield held
                    lane.buffer.clear()
                if isinstance(item, TextChunk) and lane.first_text_at is None:
                    lane.first_text_at = lane.elapsed
                if lane is not committed:
                    if streaming:
                        lane.buffer.append(item)  # drafts before any text: shown only if this lane wins
                    continue
                if isinstance(item, FinalChunk):
                    self._report(lane.name, lane.elapsed, completion=item.completion, streamed=True)
                    lanes.remove(lane)
                yield item
        finally:
            for lane in lanes:
                await lane.cancel()


def _failure_summary(decision: Decision) -> str:
    tried = ", ".join(decision.candidates)
    return f"no backend could answer (tried {tried})"

