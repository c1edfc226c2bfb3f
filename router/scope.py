"""The request scope: the one way every request goes through a router.

    decide   which backends, in order, and why (router/deciding.py): pure, no I/O
    admit    what other processes learned and the fleet's view of the session adopted, then the
             spend cap checked: once per request, before its first model call
    call     the attempts in order: fallbacks, breakers, deadline, hedging (router/execution.py),
             each through the one call path (router/calls.py: retries, budget, redaction, limits)
    stream   the same, chunk by chunk, with fallback before the first text
    finish   the session remembers the answer; the router's request observers (log, spend,
             learning) see its outcome, and so does the request's own watch

An entry point may hand a request a `Watch` (router/decision.py): it sees every upstream attempt
made for that request and its outcome. That is how the server counts what it serves (metrics,
the web view) without registering anything on the router it is given.

The CLI, the Python API (router/core.py), each server protocol, the in-process clients, the
framework adapters and sessions all reach the model through a `RequestScope`, so a guard that
lives here holds on every path: no path admits without deciding or calls without admitting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Unpack

from backends.types import Chunk, Message, Request, as_messages
from router.calls import WATCHING
from router.cost_limit import SPENDING, spending_limit
from router.deciding import Decider
from router.decision import Decision, Downgrade, Outcome, RouteResult, Watch
from router.execution import Executor
from router.options import ResolvedOptions, RouteOptions, resolve_options
from router.sessions import SessionKey

if TYPE_CHECKING:
    from router.wiring import Parts

__all__ = ["RequestScope", "RouteStream"]


class RequestScope:
    """Decide, admit, call or stream, finish: for the parts of one router (router/wiring.py)."""

    __slots__ = ("_parts", "decider")

    def __init__(self, parts: Parts):
        self._parts = parts
        self.decider = Decider(parts)

    @property
    def parts(self) -> Parts:
        return self._parts

    def session_key(self, opts: ResolvedOptions, messages: list[Message]) -> SessionKey | None:
        return self.decider.session_key(opts.session, messages, opts.extra.get("tools"))

    def decide(self, messages: list[Message], opts: ResolvedOptions, key: SessionKey | None) -> Decision:
        return self.decider.decide(messages, opts, key)

    async def admit(self, key: SessionKey | None) -> None:
        """Before a request's first model call: adopt what other processes learned (and the
        fleet's view of its session), and refuse it when the spend cap is reached."""
        parts = self._parts
        if (parts.shared.refreshes or parts.rate_limits.refreshes
                or (key is not None and parts.sessions is not None and parts.sessions.shared is not None)):
            await self.refresh(session=key.id if key is not None else None)
        if parts.spend_cap is not None:
            await parts.spend_cap.check()

    async def refresh(self, *, session: str | None = None) -> None:
        parts = self._parts
        sessions = parts.sessions
        if session is not None and sessions is not None and sessions.shared is not None:
            await sessions.load(session)
        # In turn, not gathered: both are no-ops between refreshes, and a gather's tasks would
        # cost every request more than the rare second round trip does. State kept in this
        # process (in memory, the local store) has nothing to refresh: not called at all.
        if parts.shared.refreshes:
            await parts.shared.refresh()
        if parts.rate_limits.refreshes:
            await parts.rate_limits.refresh()

    async def prepared(self, messages: list[Message], opts: ResolvedOptions) -> Decision:
        """Admitted, then decided (on what admission adopted)."""
        key = self.session_key(opts, messages)
        await self.admit(key)
        return self.decide(messages, opts, key)

    @staticmethod
    def request(messages: list[Message], opts: ResolvedOptions) -> Request:
        return Request(messages=messages, max_tokens=opts.max_tokens, temperature=opts.temperature, stop=opts.stop,
                       extra=opts.extra)

    async def acomplete(self, prompt_or_messages: str | list[Message], *, watch: Watch | None = None,
                        **options: Unpack[RouteOptions]) -> RouteResult:
        """A request, its options checked here (router/options.py), whoever sends it."""
        return await self.complete(as_messages(prompt_or_messages), resolve_options("Router.acomplete", options),
                                   watch)

    def astream(self, prompt_or_messages: str | list[Message], *, watch: Watch | None = None,
                **options: Unpack[RouteOptions]) -> RouteStream:
        return self.stream(as_messages(prompt_or_messages), resolve_options("Router.astream", options), watch)

    async def complete(self, messages: list[Message], opts: ResolvedOptions, watch: Watch | None = None) -> RouteResult:
        decision = await self.prepared(messages, opts)
        request = self.request(messages, opts)
        started = time.perf_counter()
        try:
            with _spending(opts.max_cost_usd), _watching(watch):
                result = await self._attempt_in_order(decision, request)
        except (Exception, asyncio.CancelledError) as exc:  # a caller that gave up is an outcome too
            self.finish(Outcome(decision, messages, self._parts.source, time.perf_counter() - started, error=exc),
                        watch)
            raise
        self.finish(Outcome(decision, messages, self._parts.source, time.perf_counter() - started, result=result),
                    watch)
        return result

    def stream(self, messages: list[Message], opts: ResolvedOptions, watch: Watch | None = None) -> RouteStream:
        return RouteStream(self, messages, opts, watch)

    async def _attempt_in_order(self, decision: Decision, request: Request) -> RouteResult:
        parts = self._parts
        parts.latency.begin(decision)
        try:
            return await Executor(parts.calls, hedge=parts.config.routing.hedge).complete(decision, request)
        finally:
            parts.latency.end(decision)

    async def attempts(self, decision: Decision, request: Request, opts: ResolvedOptions,
                       keep: Callable[[RouteResult], None], committed: Callable[[str], None],
                       watch: Watch | None = None) -> AsyncGenerator[Chunk, None]:
        """A stream's attempts in order: fallback before the first text, hedging and the deadline."""
        parts = self._parts
        parts.latency.begin(decision)
        executor = Executor(parts.calls, hedge=parts.config.routing.hedge)
        try:
            with _spending(opts.max_cost_usd), _watching(watch):
                async with contextlib.aclosing(executor.stream(decision, request, keep, committed)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            parts.latency.end(decision)

    def finish(self, outcome: Outcome, watch: Watch | None = None) -> None:
        """After the answer (or the failure): what the request teaches is learned now, as its own
        step -- the session's tier and backend, the client's template (only from an answered
        request) -- then the observers (log, spend, learning) see the outcome."""
        parts = self._parts
        decision = outcome.decision
        plan = decision.session
        sessions = parts.sessions
        if plan is not None and sessions is not None:
            sessions.remember(plan, outcome.result.completion if outcome.result is not None else None)
        if decision.lesson is not None and outcome.result is not None:
            parts.templates.learn(decision.lesson)
        for observer in parts.request_observers:
            observer(outcome)
        if watch is not None:
            watch.finished(outcome)


_NOTHING: contextlib.nullcontext[None] = contextlib.nullcontext()


def _spending(max_cost_usd: float | None) -> contextlib.AbstractContextManager[Any]:
    """The request's spending limit (router/cost_limit.py); without one, and none left set in
    this context, nothing to set and nothing entered there."""
    if max_cost_usd is None and SPENDING.get() is None:
        return _NOTHING
    return spending_limit(max_cost_usd)


def _watching(watch: Watch | None) -> contextlib.AbstractContextManager[Any]:
    """The request's attempts reach `watch` (router/calls.py WATCHING), and only its attempts:
    it is unset again before the request finishes, so work its observers start (the learner's
    shadow calls) is not counted as the request's. None is set too, so an outer request's watch
    never sees a request sent from inside it without one; with neither, nothing is entered."""
    if watch is None and WATCHING.get() is None:
        return _NOTHING
    return _set_watch(watch)


@contextlib.contextmanager
def _set_watch(watch: Watch | None) -> Iterator[None]:
    token = WATCHING.set(watch)
    try:
        yield
    finally:
        # A stream closed from another context (a finalizer) cannot reset: its own context ends anyway.
        with contextlib.suppress(ValueError):
            WATCHING.reset(token)


class RouteStream:
    """Async iterator of chunks (text, drafts, then one FinalChunk) with fallback before the first text."""

    def __init__(self, scope: RequestScope, messages: list[Message], opts: ResolvedOptions,
                 watch: Watch | None = None):
        self.result: RouteResult | None = None
        self.answering: str | None = None  # the backend the stream committed to, once it has
        self._scope = scope
        self._messages = messages
        self._opts = opts
        self._watch = watch
        self._key: SessionKey | None = None
        self._decision: Decision | None = None
        self._admitted = False

    async def start(self) -> Decision:
        """Admit and decide, as a call does; the errors of either (the spend cap reached,
        Unsupported, CostLimitExceeded...) are raised here. Iterating starts it too. A decision
        read earlier (`.decision`) is kept, but admission is never skipped for it."""
        if not self._admitted:
            key = self._session_key()
            await self._scope.admit(key)
            self._admitted = True
            if self._decision is None:
                self._decision = self._scope.decide(self._messages, self._opts, key)
        assert self._decision is not None  # set above, or by `.decision`
        return self._decision

    def _session_key(self) -> SessionKey | None:
        if self._key is None:
            self._key = self._scope.session_key(self._opts, self._messages)
        return self._key

    @property
    def downgrade(self) -> Downgrade | None:
        """Set once the stream committed to a backend of a weaker tier than the prompt's
        (planned, or after the stronger ones failed before their first text)."""
        if self._decision is None or self.answering is None:
            return None
        return self._decision.downgrade_to(self.answering)

    @property
    def decision(self) -> Decision:
        """The decision, made now on what this process knows when the stream has not started
        (admission still comes first when it starts)."""
        if self._decision is None:
            self._decision = self._scope.decide(self._messages, self._opts, self._session_key())
        return self._decision

    def __aiter__(self) -> AsyncGenerator[Chunk, None]:
        return self._run()

    async def _run(self) -> AsyncGenerator[Chunk, None]:
        decision = await self.start()
        scope = self._scope
        source = scope.parts.source
        started = time.perf_counter()
        request = scope.request(self._messages, self._opts)
        try:
            async for chunk in scope.attempts(decision, request, self._opts, self._keep, self._committed, self._watch):
                yield chunk
        except (Exception, asyncio.CancelledError, GeneratorExit) as exc:
            # GeneratorExit: the consumer stopped reading (a client that hung up); log it as cancelled.
            error = asyncio.CancelledError() if isinstance(exc, GeneratorExit) else exc
            scope.finish(Outcome(decision, self._messages, source, time.perf_counter() - started, error=error),
                         self._watch)
            raise
        scope.finish(Outcome(decision, self._messages, source, time.perf_counter() - started, result=self.result),
                     self._watch)

    def _keep(self, result: RouteResult) -> None:
        self.result = result

    def _committed(self, name: str) -> None:
        self.answering = name
