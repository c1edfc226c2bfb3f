"""The attempt loop: try a decision's candidates in order within one overall deadline.

    start the first candidate (breaker permitting) with the time that is left
    every running call failed                  -> start the next candidate now (fallback)
    hedging on, and the newest call is late    -> start the next candidate too (hedge); "late"
        means no first content by its p95 to first content, or (plain calls) not finished by
        its p95, or the next candidate must start now to meet the deadline at its own p95
    a call finishes                            -> it wins; every other call is cancelled
    the deadline passes                        -> everything is cancelled
    a candidate behind an open breaker         -> passed over (BreakerOpen) while another can be
                                                  tried; a request left with nothing else, and
                                                  that called nothing yet, probes the first whose
                                                  probe is due (policies/breaker.py), once, never
                                                  retried: a client retrying against a dead
                                                  upstream costs at most one call per request
    a call failed by the request's fault       -> no candidate of the same shape is tried
                                                  (backends/faults.py): it would refuse it too
    the first call failed                      -> later candidates are tried once each: the request
                                                  placed its retry bet on the first
    nothing worked                             -> AllBackendsFailed (an exception group), with the
                                                  soonest any candidate may be called again
                                                  (`retry_after_s`); RateLimitExceeded when every
                                                  one was rate-limited

Unless the plan's `on_deadline_risk` is `downgrade`, a weaker tier's candidate is never hedged
in nor moved ahead of an at-quality one to fit the time left: it starts only once every
at-quality candidate failed. A plan the policy refused (`fail`) raises DeadlineAtRisk at once.

Each call in a race is a backend's stream pumped by its own task ("lane") into one queue; a
loser's task is cancelled and its stream closed through `aclosing`, so no task or connection
outlives the request. Streaming callers commit to the first lane that yields text or a tool call: switching
models after text reached the caller would garble the answer. Without hedging, a plain call
uses `Backend.complete`, one candidate at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field

from backends.deadline import Deadline
from backends.errors import (
    AllBackendsFailed,
    BackendError,
    BackendTimeout,
    BreakerOpen,
    DeadlineAtRisk,
    MalformedResponse,
    RateLimited,
    RateLimitExceeded,
    fault_of,
)
from backends.types import Chunk, Completion, FinalChunk, Request, TextChunk, ToolCallChunk
from policies.selection import Candidate
from router.calls import DEADLINE, CallOptions, CallPath
from router.decision import Decision, RouteResult

__all__ = ["Executor"]

# What settles a streaming race: the first answer text or tool-call piece (either reaches the
# caller, so switching backends after it would garble the answer), or the end of an empty one.
_COMMITS = (TextChunk, ToolCallChunk, FinalChunk)



class _Lane:
    """One backend's stream, pumped by a task into the race's shared queue."""

    def __init__(self, name: str, calls: CallPath, request: Request, options: CallOptions, queue: asyncio.Queue):
        self.name = name
        self.started = time.perf_counter()
        self.first_text_at: float | None = None
        self.buffer: list[Chunk] = []  # chunks held back until this lane is committed to
        self.task = asyncio.create_task(self._pump(calls, request, options, queue), name=f"route-lane-{name}")

    async def _pump(self, calls: CallPath, request: Request, options: CallOptions, queue: asyncio.Queue) -> None:
        try:
            async with contextlib.aclosing(calls.stream(self.name, request, options)) as chunks:
                async for chunk in chunks:
                    queue.put_nowait((self, chunk))
                    if isinstance(chunk, FinalChunk):
                        return
            queue.put_nowait((self, MalformedResponse("stream ended without a final completion",
                                                      backend=self.name)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the consumer, which decides what it means
            queue.put_nowait((self, exc))

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    async def cancel(self, reason: str | None = None) -> None:
        """Stop the lane; `reason` DEADLINE tells the call path it timed out (not merely lost)."""
        self.task.cancel(reason)
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class Executor:
    """Runs a Decision: fallbacks, the overall deadline and optional hedging. Each candidate is
    called through the call path, which owns retries, breakers, budgets and observers."""

    def __init__(self, calls: CallPath, *, hedge: bool = False):
        self._calls = calls
        self._hedge = hedge

    def _allow(self, name: str) -> bool:
        return self._calls.breakers[name].allow()

    def _options(self, plan: _Plan, decision: Decision, name: str) -> CallOptions:
        # The breaker was asked when the candidate was picked (open ones go last, on purpose).
        # Retries: the first candidate's own; a fallback, a hedge or a last-resort probe gets none.
        once = plan.started != [name] or name == plan.probe
        return CallOptions(deadline=plan.deadline, decision=decision, p95_s=plan.p95.get(name),
                           check_breaker=False, once=once)

    def _failed(self, plan: _Plan, failures: list[BackendError], error: BackendError) -> None:
        """Note a failed call; the request's fault takes every candidate of the same shape with it."""
        failures.append(error)
        if fault_of(error) != "request" or not error.backend:
            return
        shape = self._calls.shape(error.backend)
        same = [name for name in plan.queue if self._calls.shape(name) == shape]
        plan.queue = [name for name in plan.queue if name not in same]
        plan.skipped += same

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

    async def stream(self, decision: Decision, request: Request, on_result: Callable[[RouteResult], None],
                     on_commit: Callable[[str], None] | None = None) -> AsyncGenerator[Chunk, None]:
        """Chunks of the one backend that answered; `on_commit` hears which backend that is as
        the stream commits to it (before its first text goes out), `on_result` gets the
        RouteResult before the FinalChunk is yielded."""
        failures: list[BackendError] = []
        async for chunk in self._run(decision, request, failures, streaming=True, on_commit=on_commit):
            if isinstance(chunk, FinalChunk):
                on_result(RouteResult(chunk.completion, decision, tuple(failures)))
            yield chunk

    # -- the loop -------------------------------------------------------------------------

    async def _run(self, decision: Decision, request: Request, failures: list[BackendError], *,
                   streaming: bool, on_commit: Callable[[str], None] | None = None) -> AsyncGenerator[Chunk, None]:
        if decision.plan.refused is not None:
            raise DeadlineAtRisk(_refusal(decision), tier=decision.tier, deadline_s=decision.deadline_s)
        plan = _Plan(decision, self._hedge)
        plan.on_commit = on_commit
        if streaming and (not plan.hedges or len(plan.queue) < 2):  # nothing to hedge with
            body = self._streams_in_turn(plan, request, failures)
        elif streaming or plan.hedges:
            body = self._race(plan, request, failures, streaming)
        else:
            body = self._one_by_one(plan, request, failures)
        async with contextlib.aclosing(body) as chunks:
            async for chunk in chunks:
                yield chunk
                if isinstance(chunk, FinalChunk):
                    return
        error = _all_failed(decision, failures, untried=plan.queue, skipped=plan.skipped)
        if not isinstance(error, RateLimitExceeded):
            error.retry_after_s = self._soonest(decision, failures)
        raise error

    def _soonest(self, decision: Decision, failures: list[BackendError]) -> float | None:
        """Seconds until any of the decision's candidates may be called again: 0 while one's
        breaker is closed, a rate limit's wait for one that met it; with every breaker open,
        when the last-resort probe is due (every one's probe is)."""
        names = decision.candidates
        if not names:
            return None
        limited = {e.backend: e.retry_after for e in failures if isinstance(e, RateLimited) and e.retry_after is not None}
        waits = [self._called_in(name, limited) for name in names]
        every_open = all(self._calls.breakers[name].state != "closed" for name in names)
        return max(waits) if every_open else min(waits)

    def _called_in(self, name: str, limited: dict[str, float]) -> float:
        breaker = self._calls.breakers[name]
        if breaker.state == "closed":
            return limited.get(name, 0.0)
        probe = breaker.probe_in()
        return self._calls.breakers.settings.probe_initial_s if probe is None else probe  # None: a probe in flight

    def _next(self, plan: _Plan, failures: list[BackendError], *, weaker: bool = True) -> str | None:
        """The next candidate to start, breaker permitting, or None when there is none; one
        behind an open breaker fails without a call. `weaker` False (a hedge, beside a running
        call): a held-back weaker tier's candidate is not started, even once the at-quality
        ones left were all behind open breakers."""
        while (name := plan.pop()) is not None:
            if not weaker and name in plan.held_back:
                plan.queue.insert(0, name)
                return None
            if self._allow(name):
                plan.started.append(name)
                return name
            failures.append(self._breaker_open(name))
            plan.refused.append(name)
        return self._last_resort(plan, failures) if weaker else None

    def _unstart(self, plan: _Plan, name: str) -> None:
        """`name` was picked but the deadline passed first: back in the queue, its probe slot freed."""
        plan.queue.insert(0, name)
        plan.started.remove(name)
        if name == plan.probe:
            self._calls.breakers[name].release()

    def _last_resort(self, plan: _Plan, failures: list[BackendError]) -> str | None:
        """With every candidate behind an open breaker and nothing called yet, one of them, once
        every one's probe is due (policies/breaker.py): one call, so a retrying client is answered
        by the upstream, not by a cooldown. All due, not any: backends behind one dead upstream
        are probed at the pace of one, not once each."""
        if plan.started or plan.deadline.expired():
            return None
        breakers = self._calls.breakers
        if any(breakers[name].probe_in() != 0.0 for name in plan.refused):
            return None
        for name in plan.refused:
            if breakers[name].claim_probe():
                failures[:] = [e for e in failures if not (isinstance(e, BreakerOpen) and e.backend == name)]
                plan.refused.remove(name)
                plan.started.append(name)
                plan.probe = name
                return name
        return None

    def _breaker_open(self, name: str) -> BreakerOpen:
        breaker = self._calls.breakers[name]
        probe = breaker.probe_in()
        when = f"; a request may probe it in {probe:.1f} s" if probe is not None else "; a request is probing it now"
        return BreakerOpen(f"not called: its circuit breaker is open after repeated failures{when}",
                           retry_after=probe, backend=name)

    async def _one_by_one(self, plan: _Plan, request: Request, failures: list[BackendError]) -> AsyncGenerator[Chunk, None]:
        """Plain calls in turn, no streams: the cheapest path when nothing is hedged."""
        while (name := self._next(plan, failures)) is not None:
            if plan.deadline.expired():
                self._unstart(plan, name)  # never tried: the failure says so, apart from the attempts
                return
            completion = await self._call(name, request, plan, failures)
            if completion is not None:
                yield FinalChunk(completion)
                return

    async def _streams_in_turn(self, plan: _Plan, request: Request,
                               failures: list[BackendError]) -> AsyncGenerator[Chunk, None]:
        """Streams one candidate at a time, when nothing is hedged: the next starts when one
        failed before its first text or tool call (chunks before that, drafts, are held until
        then, as a race holds them). No lane task and no queue: the chunks come up in the
        caller's task, a task switch less per chunk; the call path keeps the deadline."""
        while (name := self._next(plan, failures)) is not None:
            if plan.deadline.expired():
                self._unstart(plan, name)  # never tried: the failure says so, apart from the attempts
                return
            held: list[Chunk] | None = []  # None once committed
            try:
                async with contextlib.aclosing(self._calls.stream(name, request,
                                                                  self._options(plan, plan.decision, name))) as chunks:
                    async for chunk in chunks:
                        if held is not None:
                            if not isinstance(chunk, _COMMITS):
                                held.append(chunk)
                                continue
                            plan.commit(name)
                            for early in held:
                                yield early
                            held = None
                        yield chunk
                        if isinstance(chunk, FinalChunk):
                            return
                raise MalformedResponse("stream ended without a final completion", backend=name)
            except BackendError as exc:
                if held is None:
                    raise  # text already reached the caller: no fallback now
                self._failed(plan, failures, exc)

    async def _call(self, name: str, request: Request, plan: _Plan, failures: list[BackendError]) -> Completion | None:
        """One plain (non-streamed) call with the time that is left."""
        try:
            return await self._calls.complete(name, request, self._options(plan, plan.decision, name))
        except BackendError as exc:
            self._failed(plan, failures, exc)
            return None

    async def _race(self, plan: _Plan, request: Request, failures: list[BackendError],
                    streaming: bool) -> AsyncGenerator[Chunk, None]:
        """Candidates as streams ("lanes"): the next one starts when every running lane failed,
        or when a hedge is due. A streaming caller commits to the first lane that yields text; a
        plain call takes whichever lane finishes first. Yields only the committed lane's chunks."""
        race = _Race(plan, request, failures, streaming)
        try:
            self._start(race)
            while race.lanes:
                got = await self._wait(race)
                if got is None:  # the deadline passed or a hedge is due
                    if not self._on_timeout(race):
                        return  # `finally` cancels the lanes
                    continue
                lane, item = got
                if lane not in race.lanes:
                    continue  # a late item from a lane already dropped
                if isinstance(item, BaseException):
                    self._on_error(race, lane, item)
                    continue
                if race.commits_to(item):
                    # Held chunks are yielded here, not gathered by a helper generator: an
                    # abandoned inner generator would be finalized by a task of its own.
                    for held in await self._commit(race, lane):
                        yield held
                chunk = self._forward(race, lane, item)
                if chunk is not None:
                    yield chunk
        finally:
            for lane in race.lanes:
                await lane.cancel(DEADLINE if race.timed_out else None)

    def _start(self, race: _Race) -> bool:
        """Start the next candidate's lane with the time that is left; False when none can start."""
        plan = race.plan
        name = self._next(plan, race.failures, weaker=not race.lanes)  # lanes running: this is a hedge
        if name is None:
            return False
        if plan.deadline.expired():
            self._unstart(plan, name)  # never tried: the failure says so, apart from the attempts
            return False
        options = self._options(plan, plan.decision, name)
        race.lanes.append(_Lane(name, self._calls, race.request, options, race.queue))
        return True

    async def _wait(self, race: _Race) -> tuple[_Lane, Chunk | BaseException] | None:
        """The next (lane, item) off the queue, or None when the deadline or a hedge is due first."""
        if not race.queue.empty():  # no wait, so no timer: nothing can fall due in between
            return race.queue.get_nowait()
        wait = race.plan.deadline.remaining()
        hedge_in = None if race.committed else self._hedge_in(race.plan, race.lanes[-1], race.streaming)
        if hedge_in is not None:
            wait = hedge_in if wait is None else min(wait, hedge_in)
        try:
            async with asyncio.timeout(wait):
                return await race.queue.get()
        except TimeoutError:
            # A busy box runs the loop late, and then hands it the timer and a lane's answer in
            # the same turn: one more turn lets the lane put its answer here, where it is taken.
            if race.queue.empty():
                await asyncio.sleep(0)
            return None if race.queue.empty() else race.queue.get_nowait()

    def _on_timeout(self, race: _Race) -> bool:
        """A wait ran out: end the race at the deadline, else start a hedge. False when it is over."""
        if race.plan.deadline.expired():
            self._time_out(race)
            return False
        if not self._start(race):
            race.plan.hedges = {}  # nothing left to hedge with
        return True

    def _time_out(self, race: _Race) -> None:
        """Every running lane timed out (the race's `finally` stops them, telling the call path
        so); raises if the committed lane is among them."""
        race.timed_out = True
        for lane in race.lanes:
            error = BackendTimeout("no answer within the request's deadline", backend=lane.name)
            race.failures.append(error)
            if lane is race.committed:
                raise error  # text already reached the caller: no fallback now

    def _on_error(self, race: _Race, lane: _Lane, item: BaseException) -> None:
        """A lane failed: drop it, and fall back to the next candidate if no lane is left."""
        race.lanes.remove(lane)
        if not isinstance(item, BackendError):
            raise item
        if lane is race.committed:
            raise item  # text already reached the caller; no fallback now
        self._failed(race.plan, race.failures, item)
        if not race.lanes:
            self._start(race)  # fall back: the next candidate, now

    async def _commit(self, race: _Race, lane: _Lane) -> list[Chunk]:
        """Commit to `lane`, cancel the others, and hand back the chunks it held until now."""
        race.committed = lane
        race.plan.commit(lane.name)
        await self._cancel_losers(race.lanes, lane)
        held, lane.buffer = lane.buffer, []
        return held

    def _forward(self, race: _Race, lane: _Lane, item: Chunk) -> Chunk | None:
        """The chunk to pass on to the caller, or None while `lane` is not (yet) the one committed to."""
        if isinstance(item, TextChunk) and lane.first_text_at is None:
            lane.first_text_at = lane.elapsed
        if lane is not race.committed:
            if race.streaming:
                lane.buffer.append(item)  # drafts before any text: shown only if this lane wins
            return None
        if isinstance(item, FinalChunk):
            race.lanes.remove(lane)
        return item

    async def _cancel_losers(self, lanes: list[_Lane], winner: _Lane) -> None:
        for loser in [other for other in lanes if other is not winner]:
            lanes.remove(loser)
            await loser.cancel()  # reported by the call path as cancelled: not the backend's fault

    @staticmethod
    def _hedge_in(plan: _Plan, newest: _Lane, streaming: bool) -> float | None:
        """Seconds from now until the next candidate should join the race, or None.

        Due when the newest lane is past its p95 to first content with none yet (for a plain
        call, also when it is past its p95 to the end: its first token was on time but decoding
        slowed down), and in any case no later than the next candidate's p95 before the deadline."""
        following = plan.peek()
        if newest.name not in plan.hedges or following is None or following in plan.held_back:
            return None
        if newest.first_text_at is None:
            due = plan.hedges[newest.name]
        elif not streaming and newest.name in plan.p95:
            due = plan.p95[newest.name]
        else:
            return None
        hedge_in = due - newest.elapsed
        remaining = plan.deadline.remaining()
        if remaining is not None and following in plan.p95:
            if plan.p50.get(following, 0.0) > remaining:
                return None  # it would most likely be cut off by the deadline: not worth paying for
            hedge_in = min(hedge_in, remaining - plan.p95[following])
        return max(0.0, hedge_in)


@dataclass
class _Race:
    """The state of one race, shared by the steps of `Executor._race`."""

    plan: _Plan
    request: Request
    failures: list[BackendError]
    streaming: bool
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    lanes: list[_Lane] = field(default_factory=list)
    committed: _Lane | None = None
    timed_out: bool = False

    def commits_to(self, item: Chunk) -> bool:
        """Whether `item` settles the race: first text for a streaming caller, else the answer."""
        return self.committed is None and isinstance(item, _COMMITS if self.streaming else FinalChunk)


class _Plan:
    """The candidates still to try, and what the decision predicted about them."""

    def __init__(self, decision: Decision, hedge: bool):
        self.decision = decision
        candidates = decision.plan.candidates
        self.deadline = Deadline(decision.deadline_s)
        self.hedges: dict[str, float] = {c.name: c.hedge_after_s for c in candidates
                                         if hedge and c.hedge_after_s is not None}
        self.p50, self.p95, self.optimistic = _predicted(candidates)
        self.queue = list(decision.candidates)
        # Weaker tiers' candidates, when downgrading is not allowed: started only after failures.
        self.held_back = _held_back(decision)
        self.started: list[str] = []  # called, in order
        self.refused: list[str] = []  # passed over: breaker open
        self.skipped: list[str] = []  # not sent: a backend of the same shape refused the request
        self.probe: str | None = None  # the last-resort call, if one was made
        self.on_commit: Callable[[str], None] | None = None  # a stream's: told which backend it commits to

    def commit(self, name: str) -> None:
        """A stream commits to `name`: whoever asked to hear it (RouteStream's headers) hears it."""
        if self.on_commit is not None:
            self.on_commit(name)

    def _index(self) -> int:
        """The first queued candidate that may still fit in the time left, else the first; while
        an at-quality candidate is queued, a held-back one is never picked. (Held-back candidates
        are not always at the end: one behind an open breaker is queued after them. Counting
        them from the end let a hedge start a weaker tier's backend once the at-quality one ahead
        no longer fitted: heavy prompts answered by light models, with nothing failed.)"""
        allowed = [i for i, name in enumerate(self.queue) if name not in self.held_back] or range(len(self.queue))
        remaining = self.deadline.remaining()
        if remaining is not None:
            for i in allowed:
                if self.optimistic.get(self.queue[i], 0.0) <= remaining:
                    return i
        return allowed[0]

    def peek(self) -> str | None:
        return self.queue[self._index()] if self.queue else None

    def pop(self) -> str | None:
        return self.queue.pop(self._index()) if self.queue else None


def _predicted(candidates: Sequence[Candidate]) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """p50 and p95 per candidate (those with neither a prior nor a sample are placeholders: left
    out), and the optimistic p95 that says whether a candidate can still make it, judged as the
    policy does, so the unmeasured (0) are not passed over."""
    known = [c for c in candidates if c.prediction.known]
    return ({c.name: c.prediction.p50_s for c in known}, {c.name: c.prediction.p95_s for c in known},
            {c.name: c.prediction.optimistic_s for c in candidates})


def _held_back(decision: Decision) -> frozenset[str]:
    if decision.plan.on_deadline_risk == "downgrade":
        return frozenset()
    return frozenset(c.name for c in decision.plan.candidates if c.weaker)


def _refusal(decision: Decision) -> str:
    at_quality = [c.name for c in decision.plan.candidates if not c.weaker]
    return (f"{decision.plan.refused}, and routing.on_deadline_risk is `fail` for tier {decision.tier!r}, so nothing "
            f"was called (a weaker tier least of all; at this quality: {', '.join(at_quality)}). Allow more time "
            "(--deadline, deadline_ms), or set on_deadline_risk to `best-effort` (try the tier anyway) or "
            "`downgrade` (answer from a faster, weaker tier, marked as a downgrade).")


def _all_failed(decision: Decision, failures: list[BackendError], untried: Sequence[str] = (),
                skipped: Sequence[str] = ()) -> AllBackendsFailed:
    """RateLimitExceeded when every attempt met a rate limit (ours or the provider's), with the
    soonest known time to try again; else AllBackendsFailed. `untried`: candidates never started
    because the deadline had passed; `skipped`: not sent, another of their shape refused it."""
    if failures and not untried and not skipped and all(isinstance(e, RateLimited) for e in failures):
        waits = [e.retry_after for e in failures if isinstance(e, RateLimited) and e.retry_after is not None]
        return RateLimitExceeded("every backend this request may go to is at a rate limit", failures,
                                 retry_after_s=min(waits) if waits else None)
    return AllBackendsFailed(_failure_summary(decision, untried, skipped), failures)


def _failure_summary(decision: Decision, untried: Sequence[str] = (), skipped: Sequence[str] = ()) -> str:
    """Names the backends tried -- one reason each follows -- apart from those never started."""
    tried = [name for name in decision.candidates if name not in untried and name not in skipped]
    notes = [f"not sent to {', '.join(skipped)}, which would write it the same way"] if skipped else []
    if untried:
        notes.append(f"the deadline passed before {', '.join(untried)} could be tried")
    listed = f"tried {', '.join(tried)}" if tried else ""
    inside = "; ".join(part for part in (listed, *notes) if part)
    return f"no backend could answer ({inside})"

