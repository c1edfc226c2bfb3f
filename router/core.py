"""The Router: the Python API. Scores a prompt, picks backends, calls them with fallback.

    router = Router.from_config("config.yaml")
    result = await router.acomplete("Prove that sqrt(2) is irrational")
    print(result.text, result.decision.chosen)

`complete()` and `stream()` are thin sync wrappers for scripts; inside async code use the `a`
versions (the wrappers refuse to run inside a running event loop).

Within the scorer's tier, `router.latency` (live per-backend latency models) and `router.breakers`
decide which backend goes first (policies/selection.py); router/execution.py runs the attempts.
`Router.from_config(..., persist=True)` shares them beyond this Router, as `state:` says
(router/state/): with the processes of this machine through its SQLite store, or with every
replica through Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from backends.base import Backend
from backends.errors import Unsupported, UsageError
from backends.types import Chunk, Message, Request, as_messages
from policies.needs import SMALL_OUTPUT, Needs
from policies.routing_model import RoutingModel
from policies.scoring import Score, Scorer
from policies.selection import PREFER_CHOICES, Prefer, RouteInputs, forced_plan, plan_route
from policies.tiers import Tier, fallback_order
from router.config_loader import LoadedConfig, load_config
from router.cost_limit import SPENDING, spending_limit, within_cost
from router.decision import Attempt, Decision, Downgrade, Outcome, RouteResult
from router.execution import Executor
from router.interrupt import run_interruptibly
from router.options import ResolvedOptions, RouteOptions, resolve_options
from router.queueing import with_queue  # queue hook
from router.request_context import CLIENT_KEY
from router.sessions import Session, SessionKey, SessionPlan
from router.state.base import SharedState
from router.state.rate_limits import RateLimiter, estimate_tokens
from router.wiring import persist, wire

if TYPE_CHECKING:
    from router.store.feedback import Feedback

__all__ = ["RouteStream", "Router"]

_LOG = logging.getLogger("route")

Observer = Callable[[Attempt, "Decision | None"], None]
RequestObserver = Callable[[Outcome], None]


class Router:
    """Routes prompts across the backends (and consortia) of one config: the Python API over
    the parts router/wiring.py builds from it."""

    def __init__(self, loaded: LoadedConfig, *, backends: Mapping[str, Backend] | None = None,
                 source: str = "api", log: bool | None = None, rate_limits: RateLimiter | None = None):
        parts = self._parts = wire(loaded, backends=backends, source=source, log=log, rate_limits=rate_limits)
        self.loaded, self.config, self.source = loaded, loaded.config, source
        # The parts agents and tools look at (`route models`, /metrics, tests): read-only views.
        self.calls, self.breakers, self.latency = parts.calls, parts.breakers, parts.latency
        self.redactor, self.rate_limits, self.sessions = parts.redactor, parts.rate_limits, parts.sessions
        self.request_log, self.spend_cap, self.learner = parts.request_log, parts.spend_cap, parts.learner
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._in_process_app: Any = None  # the server app in-process clients talk to, built on first use

    @classmethod
    def from_config(cls, source: str | Any | dict | None = None, *, persist: bool = False, **kwargs: Any) -> Router:
        """From a path, a dict, or (None) the config search order. `persist` loads what earlier
        runs learned (latency) from the local store and saves back to it, so consecutive
        processes learn together; an unusable store leaves routing on config priors, with a warning."""
        router = cls(load_config(source), **kwargs)
        if persist:
            router.persist()
        return router

    def persist(self, *, warn: bool = True, state: SharedState | None = None) -> str | None:
        """Share learned state as `state:` says (or through `state`, made by the caller): the
        local store (default) or Redis. When it cannot be used: the reason (and, with `warn`, one
        logged warning); routing then runs on config priors and what this Router learns. Redis
        being down is no such reason: a Redis state runs on this process's own state until Redis
        answers (router/state/redis_state.py)."""
        problem = persist(self._parts, state=state)
        if problem is not None and warn:
            _LOG.warning("latency history unavailable (%s); routing on config priors", problem)
        return problem

    @property
    def shared(self) -> SharedState:
        """How learned state is shared (router/state/): in memory until `persist`."""
        return self._parts.shared

    @property
    def model(self) -> RoutingModel:
        """The routing model deciding now (scorer, tiers, boundaries; its `version`)."""
        return self._parts.model.current

    @property
    def scorer(self) -> Scorer:
        return self._parts.model.current.scorer

    @property
    def tiers(self) -> tuple[Tier, ...]:
        return self._parts.model.current.tiers

    async def refresh(self, *, session: str | None = None) -> None:
        """Adopt what other processes learned (latency, open breakers), at most every
        `state.refresh_ms`, and what the fleet knows of `session`. Every call and stream does
        this itself before it decides; call it before `decide` or `explain`."""
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

    def session(self, key: str | None = None) -> Session:
        """One task's calls as one session (router/sessions.py): they keep one backend while it is
        healthy, and the tier only moves up. `key`: the task's own id (default: a new one)."""
        return Session(self, key)

    def state(self) -> dict[str, dict[str, Any]]:
        """Per backend: what the latency model learned and the breaker's state (for `route
        models`, /metrics and agents that want to look before they call)."""
        return {name: {"latency": self.latency.model(name).summary(), "breaker": self.breakers[name].state}
                for name in self.config.backends}

    def names(self) -> list[str]:
        """Every name usable as `model`: backends, then consortia."""
        return self._parts.backends.names()

    def backend(self, name: str) -> Backend:
        """The backend (or consortium) called `name`, built on first use."""
        return self._parts.backends.built[name]

    def add_observer(self, observer: Observer) -> None:
        """Called after every backend attempt anywhere (routed, consortium member or arbiter;
        answered, failed or cancelled), e.g. to learn latency or count metrics."""
        self._parts.calls.add_observer(observer)

    def add_request_observer(self, observer: RequestObserver) -> None:
        """Called once at the end of every routed request (after fallbacks), e.g. by the request log."""
        self._parts.observe_requests(observer)

    @property
    def verdicts(self) -> Feedback:
        """Verdicts on logged requests and the rules for who may give them (router/store/feedback.py)."""
        return self._parts.feedback()

    def feedback(self, request_id: str | int, verdict: str) -> None:
        """Record `good` or `bad` for a logged request (its `route log` id or trace id); learning
        and `route calibrate --from-log` learn from these. The caller is the operator: any
        request may be judged (router/store/feedback.py)."""
        self._parts.feedback().record(request_id, verdict, admin=True)

    def _finish(self, outcome: Outcome) -> None:
        plan = outcome.decision.session
        sessions = self._parts.sessions
        if plan is not None and sessions is not None:
            sessions.remember(plan, outcome.result.completion if outcome.result is not None else None)
        for observer in self._parts.request_observers:
            observer(outcome)

    # -- deciding -------------------------------------------------------------------------

    def decide(self, messages: list[Message], *, model: str | None = None, deadline_s: float | None = None,
               max_tokens: int | None = None, prefer: str | None = None, needs: Needs | None = None,
               max_cost_usd: float | None = None, session: str | None = None,
               tools: list[Any] | None = None) -> Decision:
        """Which backends to try, in order, and why. No model call, no I/O.

        Within the scorer's tier, the latency model's predictions pick the backend (see
        policies/selection.py); `Decision.plan` holds each candidate's predicted p50/p95 time
        and cost. `prefer` is fast | cheap | best (default: routing.prefer). `needs` (tools,
        images, context length, a response format; read off the request by acomplete/astream)
        leaves out backends that cannot take the request; Unsupported when none can.
        `max_cost_usd` leaves out candidates predicted to cost more (router/cost_limit.py);
        CostLimitExceeded when none is left. `session` routes the call as part of that task
        (router/sessions.py): its tier only moves up, and it keeps its backend; `"auto"` derives
        the task from the conversation (`tools`: the request's tool set)."""
        key = self._session_key(session, messages, tools)
        return self._decide(messages, model, deadline_s, max_tokens, prefer, needs, max_cost_usd, key, tools)

    def _session_key(self, given: str | None, messages: list[Message], tools: Any) -> SessionKey | None:
        sessions = self._parts.sessions
        if given is None or sessions is None:
            return None
        return sessions.key_for(given, messages, tools, CLIENT_KEY.get())

    def _decide(self, messages: list[Message], model: str | None, deadline_s: float | None, max_tokens: int | None,
                prefer: str | None, needs: Needs | None, max_cost_usd: float | None,
                session: SessionKey | None, tools: Any = None) -> Decision:
        checked = self._check_prefer(prefer)
        unable = self._unable(needs)
        self._check_output(unable, needs)
        if model and model != "auto":
            decision = self._decide_forced(model, deadline_s, max_tokens, unable)
        else:
            routing = self._parts.model.current  # read once: one version decides the whole call
            sessions = self._parts.sessions
            plan = sessions.plan(session, messages, routing) if session is not None and sessions is not None else None
            decision = self._decide_routed(routing, messages, deadline_s, max_tokens, checked, unable, plan, tools)
        if max_cost_usd is None:
            return decision
        return within_cost(self._parts, decision, messages, max_tokens, max_cost_usd)

    def _decide_routed(self, routing: RoutingModel, messages: list[Message], deadline_s: float | None,
                       max_tokens: int | None, prefer: Prefer, unable: Mapping[str, str],
                       session: SessionPlan | None = None, tools: Any = None) -> Decision:
        score: Score | None
        if session is None:
            placement = routing.place(messages, tools)
            index, score, crossings, task = placement.index, placement.score, placement.crossings, placement.task
            opening = routing.reason(placement)
        else:  # the task's tier, not the transcript's (router/sessions.py)
            score, index, crossings, task = session.score, session.index, session.crossings, session.task
            opening = f"session {session.label[:24]}: {session.why}"
        tier = routing.tiers[index]
        if deadline_s is None:
            deadline_s = _seconds(tier.deadline_ms or self.config.routing.deadline_ms)
        tiers = self._capable_tiers(routing.tiers, unable)
        inputs = self._route_inputs(tiers, messages, deadline_s, max_tokens, prefer, session)
        plan = plan_route(tiers, index, inputs)
        return Decision(
            plan=plan,
            reason=f"{opening}: tier {tier.name!r}; {plan.why}",
            score=score,
            tier=tier.name,
            crossings=crossings,
            deadline_s=deadline_s,
            session=session,
            version=routing.version,
            task=task,
        )

    def _unable(self, needs: Needs | None) -> dict[str, str]:
        """Backend -> the need it cannot meet (tools, vision, context, structured), for this request."""
        if not needs:
            return {}
        unable = {}
        for name in self.names():
            backend = self.backend(name)
            output_limit = backend.output_limit if needs.output > SMALL_OUTPUT else None
            missing = needs.missing(backend.current_capabilities(), backend.settings.context_window, output_limit)
            if missing:
                unable[name] = missing
        return unable

    def _check_output(self, unable: Mapping[str, str], needs: Needs | None) -> None:
        """Unsupported, before anything else, when the answer asked for is longer than any
        backend gives (`max_tokens: 2**62`), whatever the model named."""
        if needs is None or not unable or any(unable.get(name) != "output" for name in self.names()):
            return
        longest = max(self.backend(name).output_limit for name in self.config.backends)
        raise Unsupported(f"max_tokens {needs.output:,} is more than any configured backend answers (the longest "
                          f"gives {longest:,} tokens); lower max_tokens, or set `max_output_tokens` on a backend "
                          "whose provider allows more", need="output")

    def _cannot(self, name: str, need: str) -> str:
        """Why backend `name` cannot take this request, in words ("cannot take `tools`: ...")."""
        why = self.backend(name).refusal(need)
        return f"cannot take {_NEED_WORDS[need]}" + (f": {why}" if why else "")

    def _capable_tiers(self, tiers: tuple[Tier, ...], unable: Mapping[str, str]) -> tuple[Tier, ...]:
        if not unable:
            return tiers
        capable = tuple(dataclasses.replace(t, backends=tuple(b for b in t.backends if b not in unable),
                                            left_out=tuple((b, self._cannot(b, unable[b]))
                                                           for b in t.backends if b in unable))
                        for t in tiers)
        if not any(t.backends for t in capable):
            need = next(iter(unable.values()))
            whys = "; ".join(f"{name} {why}" for t in capable for name, why in t.left_out)
            raise Unsupported(f"none of the backends `auto` routes to can take this request ({whys}); "
                              f"{self._who_can(unable, need)}", need=need)
        return capable

    def _who_can(self, unable: Mapping[str, str], need: str) -> str:
        able = [n for n in self.names() if n not in unable]
        hint = f"ask for one that can: {', '.join(able)}" if able else "no configured backend can"
        return f"{hint}, or send the request without {_NEED_WORDS[need]}"

    def _decide_forced(self, model: str, deadline_s: float | None, max_tokens: int | None,
                       unable: Mapping[str, str]) -> Decision:
        table = self._parts.backends
        if not table.knows(model):
            raise table.unknown(model)
        if model in unable:
            need = unable[model]
            raise Unsupported(f"model {model!r} {self._cannot(model, need)}; {self._who_can(unable, need)}",
                              need=need)
        if deadline_s is None:
            deadline_s = _seconds(self.config.routing.deadline_ms)
        learned = self.latency.model(model)
        if model in table.queued:  # queue hook (router/queueing.py): a backend with a line of its own
            with_queue(learned, table.queued[model])
        plan = forced_plan(model, learned.predict(max_tokens))
        return Decision(plan=plan, reason=plan.why, forced=True, deadline_s=deadline_s,
                        version=self._parts.model.current.version)

    def _check_prefer(self, prefer: str | None) -> Prefer:
        prefer = prefer or self.config.routing.prefer
        if prefer not in PREFER_CHOICES:
            raise UsageError(f"prefer must be fast, cheap or best (got {prefer!r}): fast picks the quickest backend "
                             "that is good enough, cheap the cheapest that meets the deadline, best the strongest.")
        return prefer

    def _route_inputs(self, tiers: tuple[Tier, ...], messages: list[Message], deadline_s: float | None,
                      max_tokens: int | None, prefer: Prefer, session: SessionPlan | None = None) -> RouteInputs:
        parts = self._parts
        names = fallback_order(tiers, 0)
        states = {name: parts.breakers[name].state for name in names}
        settings = self.config.routing.latency
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        models = {name: parts.latency.model(name) for name in names}
        queued = parts.backends.queued
        for name in queued.keys() & models.keys() if queued else ():
            # queue hook (router/queueing.py): a backend's own line of requests is part of its prediction
            with_queue(models[name], queued[name])
        return RouteInputs(
            models=models,
            prices=parts.prices,
            input_tokens=chars // 4,  # ~4 characters per token: close enough for a cost estimate
            max_tokens=max_tokens,
            deadline_s=deadline_s,
            prefer=prefer,
            cost_tolerance=self.config.routing.cost_tolerance,
            blocked={n for n, st in states.items() if st == "open"},
            half_open={n for n, st in states.items() if st == "half-open"},
            exploring=frozenset(parts.latency.exploring),
            now=time.time(),
            stale_after_s=settings.stale_after_ms / 1000,
            explore_rate=settings.explore_rate,
            explore_roll=parts.random.random(),
            hedge=self.config.routing.hedge,
            on_deadline_risk=self.config.routing.on_deadline_risk,
            limited=self._limited(names, messages, max_tokens),
            sticky=session.sticky if session is not None else None,
            cached_tokens=session.cached if session is not None else {},
        )

    def _limited(self, names: list[str], messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        """The candidates at their rate limits for this request (none without limits: nothing read)."""
        limiter = self._parts.rate_limits
        limited = [name for name in names if ("backend", name) in limiter.limits]
        if not limited:
            return {}
        tokens = estimate_tokens(messages, max_tokens)  # what a call would take from a backend's tpm
        return {n: refused for n in limited if (refused := limiter.peek(n, tokens)) is not None}

    def explain(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> Decision:
        """The decision `acomplete` would make for this request, and why; calls no model. Give
        it what the request carries (tools, response_format, images in the messages): they
        decide which backends may take it."""
        opts = resolve_options("Router.explain", options)
        messages = as_messages(prompt_or_messages)
        return self._decision(messages, opts, self._session_key(opts.session, messages, opts.extra.get("tools")))

    def _decision(self, messages: list[Message], opts: ResolvedOptions, session: SessionKey | None) -> Decision:
        return self._decide(messages, opts.model, opts.deadline_s, opts.max_tokens, opts.prefer,
                            Needs.of(messages, opts.extra, opts.max_tokens), opts.max_cost_usd, session,
                            opts.extra.get("tools"))

    async def _prepared(self, messages: list[Message], opts: ResolvedOptions) -> Decision:
        """What every call and stream does before its first model call: adopt what other
        processes learned (and the fleet's view of its session), check the spend cap, decide."""
        key = self._session_key(opts.session, messages, opts.extra.get("tools"))
        parts = self._parts
        if (parts.shared.refreshes or parts.rate_limits.refreshes
                or (key is not None and parts.sessions is not None and parts.sessions.shared is not None)):
            await self.refresh(session=key.id if key is not None else None)
        if self.spend_cap is not None:
            await self.spend_cap.check()
        return self._decision(messages, opts, key)

    # -- calling --------------------------------------------------------------------------

    @staticmethod
    def _request(messages: list[Message], opts: ResolvedOptions) -> Request:
        return Request(messages=messages, max_tokens=opts.max_tokens, temperature=opts.temperature, stop=opts.stop,
                       extra=opts.extra)

    async def acomplete(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> RouteResult:
        """Answer with the best backend for this prompt, falling back on failure within the
        deadline. Options: router/options.py (`RouteOptions`); an unknown one is a TypeError."""
        opts = resolve_options("Router.acomplete", options)
        messages = as_messages(prompt_or_messages)
        decision = await self._prepared(messages, opts)
        request = self._request(messages, opts)
        started = time.perf_counter()
        try:
            with _spending(opts.max_cost_usd):
                result = await self._attempt_in_order(decision, request)
        except (Exception, asyncio.CancelledError) as exc:  # a caller that gave up is an outcome too
            self._finish(Outcome(decision, messages, self.source, time.perf_counter() - started, error=exc))
            raise
        self._finish(Outcome(decision, messages, self.source, time.perf_counter() - started, result=result))
        return result

    async def _attempt_in_order(self, decision: Decision, request: Request) -> RouteResult:
        """The attempt loop lives in router/execution.py: fallbacks, breakers, deadline, hedging."""
        self.latency.begin(decision)
        try:
            return await Executor(self.calls, hedge=self.config.routing.hedge).complete(decision, request)
        finally:
            self.latency.end(decision)

    def astream(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> RouteStream:
        """A stream of chunks whose `.result` is known after the last. It decides as a call
        does, when iteration starts (after adopting what other processes learned); `await
        stream.start()` decides without reading a chunk, and `.decision` is then known."""
        opts = resolve_options("Router.astream", options)
        messages = as_messages(prompt_or_messages)
        return RouteStream(self, messages, opts)

    # -- sync wrappers --------------------------------------------------------------------

    @staticmethod
    def _refuse_inside_a_loop() -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise UsageError("Router.complete()/stream() were called inside a running event loop; "
                         "use `await router.acomplete(...)` or `router.astream(...)` there.")

    def _run_sync(self, awaitable):
        if self._sync_loop is None or self._sync_loop.is_closed():
            # One private loop for all sync calls, so pooled connections are reused between them.
            self._sync_loop = asyncio.new_event_loop()
        return run_interruptibly(self._sync_loop, awaitable)  # Ctrl-C cancels the call (router/interrupt.py)

    def complete(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> RouteResult:
        """`acomplete` for scripts (refused inside a running event loop)."""
        resolve_options("Router.complete", options)  # a typo is reported under the name the caller used
        self._refuse_inside_a_loop()
        return self._run_sync(self.acomplete(prompt_or_messages, **options))

    def stream(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> Iterator[Chunk]:
        """`astream` for scripts, as an iterator of chunks (refused inside a running event loop)."""
        resolve_options("Router.stream", options)
        self._refuse_inside_a_loop()
        return self._iterate_sync(self.astream(prompt_or_messages, **options))

    # -- for frameworks that take an OpenAI client ----------------------------------------

    def openai_client(self, **kwargs: Any) -> Any:
        """An `openai.OpenAI` whose requests this router's server app answers in process: no
        socket, streams chunk by chunk as they are produced (router/inprocess.py)."""
        from router.inprocess import openai_client

        return openai_client(self._app(), **kwargs)

    def async_openai_client(self, **kwargs: Any) -> Any:
        """An `openai.AsyncOpenAI` answered in process by this router (router/inprocess.py)."""
        from router.inprocess import async_openai_client

        return async_openai_client(self._app(), **kwargs)

    def _app(self) -> Any:
        """The server's app over this router, built once (it adds the server's observers)."""
        if self._in_process_app is None:
            from router.server.app import create_app

            self._in_process_app = create_app(self, close_router=False)  # the caller owns this router's lifetime
        return self._in_process_app

    def _iterate_sync(self, route_stream: RouteStream) -> Iterator[Chunk]:
        iterator = route_stream.__aiter__()
        while True:
            try:
                yield self._run_sync(anext(iterator))
            except StopAsyncIteration:
                return

    async def aclose(self) -> None:
        parts = self._parts
        if parts.learner is not None:
            await parts.learner.aclose()
        await parts.latency.aflush()  # learned latency reaches the store even when the process ends next
        if parts.sessions is not None and parts.sessions.shared is not None:
            await parts.sessions.shared.aclose()  # the last sessions' states reach the fleet
        await parts.shared.aclose()
        await parts.backends.aclose()
        if parts.rate_limits.link is not None:
            await parts.rate_limits.link.aclose()  # the same link as a Redis state's: closing twice is harmless

    def close(self) -> None:
        if self._sync_loop is not None and not self._sync_loop.is_closed():
            self._sync_loop.run_until_complete(self.aclose())
            self._sync_loop.run_until_complete(self._sync_loop.shutdown_asyncgens())
            self._sync_loop.close()
        self._sync_loop = None

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()


def _seconds(ms: float | None) -> float | None:
    return ms / 1000 if ms else None


_NO_LIMIT: contextlib.nullcontext[None] = contextlib.nullcontext()


def _spending(max_cost_usd: float | None) -> contextlib.AbstractContextManager[Any]:
    """The request's spending limit (router/cost_limit.py); without one, and none left set in
    this context, nothing to set and nothing entered there."""
    if max_cost_usd is None and SPENDING.get() is None:
        return _NO_LIMIT
    return spending_limit(max_cost_usd)


_NEED_WORDS = {"tools": "`tools`", "vision": "image input", "context": "a prompt this long",
               "structured": "`response_format`", "output": "a `max_tokens` this large"}


class RouteStream:
    """Async iterator of chunks (text, drafts, then one FinalChunk) with fallback before the first text."""

    def __init__(self, router: Router, messages: list[Message], opts: ResolvedOptions):
        self.result: RouteResult | None = None
        self.answering: str | None = None  # the backend the stream committed to, once it has
        self._router = router
        self._messages = messages
        self._opts = opts
        self._decision: Decision | None = None

    async def start(self) -> Decision:
        """Decide, as a call does (after adopting what other processes learned); the decision's
        errors (Unsupported, CostLimitExceeded...) are raised here. Iterating starts it too."""
        if self._decision is None:
            self._decision = await self._router._prepared(self._messages, self._opts)
        return self._decision

    @property
    def downgrade(self) -> Downgrade | None:
        """Set once the stream committed to a backend of a weaker tier than the prompt's
        (planned, or after the stronger ones failed before their first text)."""
        if self._decision is None or self.answering is None:
            return None
        return self._decision.downgrade_to(self.answering)

    @property
    def decision(self) -> Decision:
        """The decision, made now on what this process knows when the stream has not started."""
        if self._decision is None:
            router = self._router
            key = router._session_key(self._opts.session, self._messages, self._opts.extra.get("tools"))
            self._decision = router._decision(self._messages, self._opts, key)
        return self._decision

    def __aiter__(self) -> AsyncGenerator[Chunk, None]:
        return self._run()

    async def _run(self) -> AsyncGenerator[Chunk, None]:
        decision = await self.start()
        router = self._router
        started = time.perf_counter()
        request = router._request(self._messages, self._opts)
        try:
            async for chunk in self._attempt_in_order(decision, request):
                yield chunk
        except (Exception, asyncio.CancelledError, GeneratorExit) as exc:
            # GeneratorExit: the consumer stopped reading (a client that hung up); log it as cancelled.
            error = asyncio.CancelledError() if isinstance(exc, GeneratorExit) else exc
            router._finish(Outcome(decision, self._messages, router.source, time.perf_counter() - started,
                                   error=error))
            raise
        router._finish(Outcome(decision, self._messages, router.source, time.perf_counter() - started,
                               result=self.result))

    async def _attempt_in_order(self, decision: Decision, request: Request) -> AsyncGenerator[Chunk, None]:
        """Fallback before the first text, hedging and the deadline: see router/execution.py."""
        router = self._router
        router.latency.begin(decision)
        executor = Executor(router.calls, hedge=router.config.routing.hedge)

        def keep(result: RouteResult) -> None:
            self.result = result

        def committed(name: str) -> None:
            self.answering = name

        try:
            with _spending(self._opts.max_cost_usd):
                async with contextlib.aclosing(executor.stream(decision, request, keep, committed)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            router.latency.end(decision)
