"""The one entry point for every model call: routed requests, forced `-m`, consortium members,
arbiters, iteration rounds and both servers all call a backend through `CallPath`.

For one call to one backend it owns, in this order per attempt:

    spending     the request's `max_cost_usd` against what its calls cost so far (router/cost_limit.py);
                 CostLimitExceeded ends the request, never retried
    rate limit   take from the backend's rpm / tpm buckets (router/state/rate_limits.py); at its
                 limit the attempt fails at once with AtRateLimit (never retried, no breaker verdict,
                 so the router moves to the next candidate); tpm is corrected with the real usage
    budget       charge the innermost consortium run and every run around it (upstream attempts,
                 retries included); a spent budget fails the attempt, never retried
    breaker      refuse a backend whose breaker is open (unless the caller already decided to
                 try it as a last resort); record success / failure / release afterwards
    concurrency  a slot in the global limit (`routing.max_concurrency`) and in every enclosing
                 consortium's `max_concurrency`, so nesting cannot multiply either
    deadline     the attempt gets the time left; a stream is cut at the deadline too
    retries      the one retry policy (policies/retry.py), within the deadline; a stream is
                 retried only before its first chunk reached the caller. Unless the caller says
                 how often (CallOptions.retries), a retry bets on a blip: none for a backend
                 already failing when the call starts, and, when a client retries on its own
                 (`route serve`: `retry_unheard` False), none for a backend not yet heard
                 answering -- the client's retry is the retry, so a dead upstream costs one
                 call per client request, as going direct would
    observers    every attempt -- answered, failed or cancelled -- reaches the attempt observers
                 (latency learning) with its elapsed time, and the watch of the request it was
                 made for (WATCHING: the server's metrics and web view), a rate limit's refusal too
    verdicts     only the backend's faults and pressure (backends/faults.py) count against it:
                 the request's fault and the credential's leave its breaker and retry budget
                 as they were
    redaction    errors, completions and streams lose every secret the router holds
                 (router/redaction.py), a stream as one text: a key split across chunks is found

Composite backends (a consortium) make their own calls through this path, so for them it only
times the call and reports it: no retry, no budget, no slot, no breaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from backends.base import Backend
from backends.deadline import Deadline, Watchdog
from backends.errors import AtRateLimit, BackendError, BackendTimeout, BreakerOpen, MalformedResponse, fault_of
from backends.per_loop import PerLoop
from backends.types import Chunk, Completion, FinalChunk, Request
from policies.breaker import BreakerBoard
from policies.retry import RetryBudget, RetryPolicy
from router import cost_limit
from router.consortium.budget import CURRENT_RUN, Reservation
from router.decision import Attempt, Decision, Watch
from router.redaction import Redactor
from router.state.rate_limits import estimate_tokens

if TYPE_CHECKING:
    from router.state.rate_limits import RateLimiter

__all__ = ["DEADLINE", "WATCHING", "AttemptObserver", "CallOptions", "CallPath", "call_with_retries"]

# The cancellation message of a call stopped because its deadline passed: reported as a timeout
# (evidence about the backend), not as a caller that went away.
DEADLINE = "route: the request's deadline passed"

AttemptObserver = Callable[[Attempt, "Decision | None"], None]
T = TypeVar("T")

# The watch of the request being answered (router/scope.py sets it for the request's calls): a
# context variable, so the calls a consortium makes in tasks of its own are seen by it too.
WATCHING: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("route_watching", default=None)


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class CallOptions:
    """How one call is made. `retries` overrides the backend's `max_retries` (a consortium's
    `retries`); `label` names the call in budget messages; `reservation` is the budget call a
    consortium put aside for its arbiter; `p95_s` is what the caller predicted (a timeout before
    it is no evidence against the backend); `check_breaker` False when the caller already asked
    the breaker (the router's fallback order tries open breakers last, deliberately);
    `attempt_timeout_s` limits each attempt (a consortium's member_timeout_s) inside `deadline`;
    `on_error(error, elapsed_s)` hears of every failed attempt (a consortium's trace); `once`:
    never retried, whatever any limit says (the router's fallbacks, hedges and probes)."""

    deadline: Deadline
    decision: Decision | None = None
    retries: int | None = None
    label: str = ""
    reservation: Reservation | None = None
    p95_s: float | None = None
    check_breaker: bool = True
    attempt_timeout_s: float | None = None
    on_error: Callable[[BaseException, float], None] | None = None
    once: bool = False

    def attempt_deadline(self) -> Deadline:
        return self.deadline.within(self.attempt_timeout_s)


class CallPath:
    """Calls backends by name, with every guarantee listed in the module docstring."""

    def __init__(self, resolve: Callable[[str], Backend], *, breakers: BreakerBoard, max_concurrency: int = 128,
                 retry_per_class: dict[str, int] | None = None, redactor: Redactor | None = None,
                 limits: RateLimiter | None = None, retry_budget: RetryBudget | None = None,
                 retry_unheard: bool = True, observers: Iterable[AttemptObserver] = ()):
        self._resolve = resolve
        self.retry_unheard = retry_unheard
        self.breakers = breakers
        self.limits = limits
        self.redactor = redactor or Redactor()
        # The global limit: a semaphore is bound to the loop it first waited on.
        self._slots = PerLoop(lambda: asyncio.Semaphore(max_concurrency))
        self._retry_per_class = dict(retry_per_class or {})
        self.retry_budget = retry_budget or RetryBudget()
        self.observers = tuple(observers)
        self.in_flight = 0  # leaf attempts holding a slot right now (read by metrics and tests)
        self.peak_in_flight = 0

    def shape(self, name: str) -> str:
        """How backend `name` writes a request (Backend.shape): one that refused a request stands
        for every backend of its shape."""
        return self._resolve(name).shape

    # -- public -----------------------------------------------------------------------------

    async def complete(self, name: str, request: Request, options: CallOptions) -> Completion:
        """One plain call, retried as the policy allows within the deadline."""
        backend = self._resolve(name)
        if backend.capabilities.composite:
            return await self._composite(backend, request, options)
        return await call_with_retries(lambda: self._complete_once(backend, request, options),
                                       policy=self._policy(backend, options), deadline=options.deadline)

    async def stream(self, name: str, request: Request, options: CallOptions) -> AsyncGenerator[Chunk, None]:
        """Chunks of one backend; attempts that fail before their first chunk are retried."""
        backend = self._resolve(name)
        attempt: _StreamAttempt | None = None
        try:
            if backend.capabilities.composite:
                attempt = await self._open(backend, request, options, composite=True)
            else:
                attempt = await call_with_retries(lambda: self._open(backend, request, options),
                                                  policy=self._policy(backend, options), deadline=options.deadline)
            redact = self.redactor.stream()  # one per call: a key split across chunks is found whole
            async for chunk in attempt.rest():
                if redact is None:
                    yield chunk
                else:
                    for piece in redact.chunk(chunk):
                        yield piece
        finally:
            if attempt is not None:
                await attempt.close()

    # -- one attempt ------------------------------------------------------------------------

    def _policy(self, backend: Backend, options: CallOptions) -> RetryPolicy:
        retries = backend.settings.max_retries if options.retries is None else options.retries
        breaker = self.breakers[backend.name]
        blip = not breaker.failing and (breaker.answered or self.retry_unheard)  # what a retry bets on
        if options.once or (options.retries is None and not blip):
            return RetryPolicy(0, backend.settings.backoff_initial_s)  # none, whatever `routing.retries` says
        return RetryPolicy(retries, backend.settings.backoff_initial_s, self._retry_per_class,
                           budget=lambda: self.retry_budget.allows_retry(backend.name))

    async def _admit(self, backend: Backend, request: Request, options: CallOptions) -> int | None:
        """The breaker first (a refused call spends no budget), then the rate limit, then the
        budget, then the breaker's permission (which, half-open, makes this call its probe).
        Returns the tokens charged to the backend's limits (None: it has none)."""
        breaker = self.breakers[backend.name]
        spending = cost_limit.SPENDING.get()
        if spending is not None:
            cost_limit.admit(spending, backend, request)  # the request's max_cost_usd, against what it spent so far
        if options.check_breaker and not breaker.would_allow():
            raise BreakerOpen("circuit breaker is open after repeated failures; skipped until its cooldown ends",
                              retry_after=breaker.cooldown_left(), **backend.where())
        limits = self.limits
        charged = (await self._take_rate(backend, request, options)
                   if limits is not None and ("backend", backend.name) in limits.limits else None)
        if options.reservation is not None:
            options.reservation.spend(options.label or backend.name)
        else:
            run = CURRENT_RUN.get()
            if run is not None:
                run.budget.take(options.label or backend.name)
        if options.check_breaker:
            breaker.allow()
        return charged

    async def _take_rate(self, backend: Backend, request: Request, options: CallOptions) -> int:
        """One request off the rpm of a backend that has limits, its estimate off tpm; AtRateLimit
        when either is spent."""
        assert self.limits is not None
        tokens = estimate_tokens(request.messages, request.max_tokens)
        refused = await self.limits.take(backend.name, tokens)
        if refused is None:
            return tokens
        watch = WATCHING.get()
        if watch is not None:
            watch.refused(backend.name)
        if not options.check_breaker:
            self.breakers[backend.name].release()  # the caller claimed a half-open probe it will not make
        raise AtRateLimit(refused.describe(), retry_after=refused.free_in_s, **backend.where())

    async def _settle(self, name: str, charged: int, completion: Completion) -> None:
        """tpm pays for what the answer really used (the admission charged an estimate)."""
        used = completion.usage.input_tokens + completion.usage.output_tokens
        if used and self.limits is not None:
            await self.limits.settle(name, charged, used)

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """A slot in the global limit and in every enclosing consortium's, outermost first (one
        order for every call, so two calls never wait on each other's slots)."""
        run = CURRENT_RUN.get()
        if run is None or not run.limits:  # the common case, one semaphore: no exit stack to build
            async with self._slots.get():
                self._enter()
                try:
                    yield
                finally:
                    self.in_flight -= 1
            return
        async with contextlib.AsyncExitStack() as stack:
            for sem in (self._slots.get(), *run.limits):
                await stack.enter_async_context(sem)
            self._enter()
            try:
                yield
            finally:
                self.in_flight -= 1

    def _enter(self) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    async def _complete_once(self, backend: Backend, request: Request, options: CallOptions) -> Completion:
        charged = await self._admit(backend, request, options)
        started = time.perf_counter()
        try:
            async with self._slot():
                remaining = options.attempt_deadline().remaining()
                # A guard for kinds that do not keep the deadline themselves; one that does must
                # not be cut from outside as well, or an answer arriving with the deadline is lost.
                guard = contextlib.nullcontext() if backend.keeps_deadline else asyncio.timeout(remaining)
                async with guard:
                    completion = self.redactor.completion(
                        await backend.complete(request.with_timeout(remaining)))
        except TimeoutError as exc:
            self._failed(backend.name, exc, started, options, streamed=False)
            raise BackendTimeout("no answer within the request's deadline", **backend.where()) from exc
        except BaseException as exc:
            self._failed(backend.name, exc, started, options, streamed=False)
            raise
        self._answered(backend.name, completion, started, options, streamed=False)
        if charged is not None:  # a backend with rate limits
            await self._settle(backend.name, charged, completion)
        return completion

    async def _open(self, backend: Backend, request: Request, options: CallOptions, *,
                    composite: bool = False) -> _StreamAttempt:
        """Start one streamed attempt and wait for its first chunk."""
        charged = None if composite else await self._admit(backend, request, options)
        attempt = _StreamAttempt(self, backend, request, options, composite=composite)
        attempt.charged = charged
        try:
            await attempt.start()
        except BaseException:
            await attempt.close()
            raise
        return attempt

    async def _composite(self, backend: Backend, request: Request, options: CallOptions) -> Completion:
        started = time.perf_counter()
        try:
            completion = self.redactor.completion(
                await backend.complete(request.with_timeout(options.deadline.remaining())))
        except BaseException as exc:
            self._failed(backend.name, exc, started, options, streamed=False, composite=True)
            raise
        self._answered(backend.name, completion, started, options, streamed=False, composite=True)
        return completion

    # -- reporting ----------------------------------------------------------------------------

    def _answered(self, name: str, completion: Completion, started: float, options: CallOptions, *,
                  streamed: bool, composite: bool = False) -> None:
        if not composite:
            self.breakers[name].record_success()
            self.retry_budget.record(name, ok=True)
            spending = cost_limit.SPENDING.get()
            if spending is not None:
                cost_limit.spent(spending, completion.cost_usd)
        self._notify(Attempt(name, time.perf_counter() - started, completion=completion, streamed=streamed),
                     options)

    def _failed(self, name: str, exc: BaseException, started: float, options: CallOptions, *, streamed: bool,
                composite: bool = False, first_s: float | None = None) -> None:
        elapsed = time.perf_counter() - started
        self.redactor.error(exc)  # before anyone -- observer, caller, log -- sees it
        if isinstance(exc, asyncio.CancelledError) and exc.args and exc.args[0] == DEADLINE:
            exc = TimeoutError()
        cancelled = isinstance(exc, (asyncio.CancelledError, GeneratorExit))
        if isinstance(exc, TimeoutError):
            exc = BackendTimeout("no answer within the request's deadline", backend=name)
        if not isinstance(exc, BackendError) and not cancelled:
            if not composite:
                self.breakers[name].release()  # a usage error or a bug: no evidence either way
            return
        if not composite:
            self._verdict(name, exc, elapsed, options)
        error = exc if isinstance(exc, BackendError) else BackendTimeout("cancelled: the caller stopped waiting",
                                                                         backend=name)
        if options.on_error is not None and not cancelled:
            options.on_error(error, elapsed)
        self._notify(Attempt(name, elapsed, error=error, streamed=streamed, cancelled=cancelled, first_s=first_s),
                     options)

    def _verdict(self, name: str, exc: BaseException, elapsed: float, options: CallOptions) -> None:
        breaker = self.breakers[name]
        p95 = options.p95_s if options.p95_s is not None else 0.0
        if isinstance(exc, (asyncio.CancelledError, GeneratorExit)) or fault_of(exc) in ("request", "credential"):
            breaker.release()  # the caller's doing, the request's fault or the key's: nothing about the backend
        elif isinstance(exc, BackendTimeout) and elapsed < p95:
            breaker.release()  # cut short by a tight overall deadline: no evidence against it
        elif not isinstance(exc, BreakerOpen | AtRateLimit):  # not called at all: no evidence either
            breaker.record_failure()
            self.retry_budget.record(name, ok=False)

    def _notify(self, attempt: Attempt, options: CallOptions) -> None:
        for observer in self.observers:
            observer(attempt, options.decision)
        watch = WATCHING.get()
        if watch is not None:
            watch.attempt(attempt, options.decision)


async def call_with_retries(attempt: Callable[[], Awaitable[T]], *, policy: RetryPolicy, deadline: Deadline) -> T:
    """Run `attempt` until it succeeds or the policy says the last error stands (policies/retry.py).
    The loop lives here, beside the attempts it repeats, so a call goes down through the policy
    and never back up through it."""
    retries = 0
    while True:
        try:
            return await attempt()
        except BaseException as exc:  # a cancellation is not retryable: re-raised as it is
            wait = policy.wait_before_retry(exc, retries, deadline.remaining())
            if wait is None:
                raise
        await asyncio.sleep(wait)
        retries += 1


class _StreamAttempt:
    """One streamed attempt: holds its slot from the first byte to the last chunk."""

    def __init__(self, path: CallPath, backend: Backend, request: Request, options: CallOptions, *,
                 composite: bool):
        self.path, self.backend, self.options, self.composite = path, backend, options, composite
        self.deadline = options.attempt_deadline()
        self.request = request.with_timeout(self.deadline.remaining())
        self.started = time.perf_counter()
        self.first: Chunk | None = None
        self.first_s: float | None = None  # seconds to the first chunk, once it came
        self.done = False
        self.charged: int | None = None  # tokens the rate limit charged at admission
        self._stack = contextlib.AsyncExitStack()
        self._chunks: AsyncGenerator[Chunk, None] | None = None
        self._watchdog: Watchdog | None = None

    async def start(self) -> None:
        if not self.composite:
            await self._stack.enter_async_context(self.path._slot())
        self._chunks = self.backend.stream(self.request)
        self._watchdog = Watchdog(self.deadline)  # one timer for the attempt, not one per chunk
        self.first = await self._next()
        self.first_s = time.perf_counter() - self.started

    async def _next(self) -> Chunk:
        assert self._chunks is not None and self._watchdog is not None
        try:
            with self._watchdog:  # text is redacted across chunks, in CallPath.stream
                chunk = await anext(self._chunks, None)
        except BaseException as exc:
            self._fail(exc)
            if isinstance(exc, TimeoutError):
                raise BackendTimeout("no answer within the request's deadline", **self.backend.where()) from exc
            raise
        if chunk is None:
            error = MalformedResponse("stream ended without a final completion", **self.backend.where())
            self._fail(error)
            raise error
        if isinstance(chunk, FinalChunk):
            chunk = self.path.redactor.final(chunk)  # before any observer sees it
            self.done = True
            self.path._answered(self.backend.name, chunk.completion, self.started, self.options, streamed=True,
                                composite=self.composite)
            if self.charged is not None:  # a backend with rate limits
                await self.path._settle(self.backend.name, self.charged, chunk.completion)
        return chunk

    def _fail(self, exc: BaseException) -> None:
        self.done = True
        self.path._failed(self.backend.name, exc, self.started, self.options, streamed=True, composite=self.composite,
                          first_s=self.first_s)

    async def rest(self) -> AsyncIterator[Chunk]:
        chunk = self.first
        while chunk is not None:
            yield chunk
            if isinstance(chunk, FinalChunk):
                return
            chunk = await self._next()

    async def close(self) -> None:
        """Close the backend's stream and give the slot back; an unfinished attempt was cancelled."""
        if self._watchdog is not None:
            self._watchdog.stop()
        if not self.done:
            self._fail(asyncio.CancelledError())
        try:
            if self._chunks is not None:
                await self._chunks.aclose()
        finally:
            await self._stack.aclose()
