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
import random
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from backends import build_backend
from backends.base import Backend
from backends.errors import ConfigError, Unsupported, UsageError
from backends.types import Chunk, Message, Request, as_messages
from policies.breaker import BreakerBoard, BreakerSettings
from policies.ladder import Ladder
from policies.needs import SMALL_OUTPUT, Needs
from policies.retry_budget import RetryBudget, RetryBudgetSettings
from policies.scoring import Score, Scorer, build_scorer
from policies.selection import PREFER_CHOICES, Prefer, RouteInputs, forced_plan, plan_route
from policies.tiers import Tier, fallback_order
from router.calls import CallPath
from router.config import ScorerConfig
from router.config_loader import LoadedConfig, _did_you_mean, load_config
from router.cost_limit import spending_limit
from router.decision import Attempt, Decision, Outcome, RouteResult
from router.execution import Executor
from router.interrupt import run_interruptibly
from router.latency_tracker import LatencyTracker
from router.options import ResolvedOptions, RouteOptions, resolve_options
from router.queueing import with_queue  # queue hook
from router.redaction import Redactor
from router.sessions import Session, SessionPlan, Sessions, SessionTable
from router.state.base import SharedState
from router.state.rate_limits import RateLimiter, estimate_tokens, rate_limiter_for

if TYPE_CHECKING:
    from router.learning.learner import Learner

__all__ = ["RouteStream", "Router"]

_LOG = logging.getLogger("route")

Observer = Callable[[Attempt, "Decision | None"], None]
RequestObserver = Callable[[Outcome], None]


class Router:
    """Routes prompts across the backends (and consortia) of one config."""

    def __init__(self, loaded: LoadedConfig, *, backends: Mapping[str, Backend] | None = None,
                 source: str = "api", log: bool | None = None):
        self.loaded = loaded
        self.source = source  # who is asking, for the request log: cli | api | server
        self.config = loaded.config
        self.scorer: Scorer = self._build_scorer()
        self.ladder: Ladder = self._build_ladder()
        self.tiers: tuple[Tier, ...] = self.ladder.tiers
        self._backends: dict[str, Backend] = dict(backends or {})
        self._request_observers: list[RequestObserver] = []
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        breaker = self.config.routing.breaker
        self.breakers = BreakerBoard(time.monotonic, BreakerSettings(breaker.failures, breaker.cooldown_ms / 1000,
                                                                     breaker.probe_ms / 1000))
        # Every model call, routed or not, goes through this one path (router/calls.py).
        # Every string that leaves the process is scrubbed of the secrets this config refers to.
        self.redactor = Redactor.for_config(self.config)
        self.rate_limits = _rate_limits(loaded)
        self.calls = CallPath(self.backend, breakers=self.breakers, max_concurrency=self.config.routing.max_concurrency,
                              retry_per_class={str(k): v for k, v in self.config.routing.retries.items()},
                              redactor=self.redactor, limits=self.rate_limits, retry_unheard=source != "server",
                              retry_budget=RetryBudget(RetryBudgetSettings(self.config.routing.retry_budget.tokens,
                                                                           self.config.routing.retry_budget.ratio)))
        # The live latency model learns from every attempt anywhere: routed, member or arbiter.
        self.latency = LatencyTracker.from_config(self.config)
        sessions = self.config.routing.sessions
        # A session's task keeps its backend and its tier only moves up (router/sessions.py).
        self.sessions: Sessions | None = Sessions(
            self.ladder, self.scorer, SessionTable(max_entries=sessions.max_entries, ttl_s=sessions.ttl_s),
            cache_ttl_s=sessions.cache_ttl_s) if sessions.enabled else None
        if self.sessions is not None and self.rate_limits.link is not None:  # state in Redis: sessions too
            from router.state.sessions_redis import SharedSessions

            self.sessions.shared = SharedSessions(self.rate_limits.link, self.sessions.table)
        self.calls.add_observer(self.latency.observe)
        self.shared = SharedState()  # in memory until persist() attaches `state:` (router/state/)
        self._random = random.Random()  # exploration rolls; tests may seed it
        self._prices = {name: spec.settings(name).price for name, spec in self.config.backends.items()}
        # The request log: one record per routed request, written off the event loop.
        # `log` overrides the config's `log.enabled` (the CLI's --no-log).
        self.request_log = None
        if self.config.log.enabled if log is None else log:
            from router.store.feedback import attach_consortium_preferences
            from router.store.request_log import attach_request_log

            self.request_log = attach_request_log(self)
            attach_consortium_preferences(self)
        from router.store.spend import spend_cap_for

        self.spend_cap = spend_cap_for(self)  # None without spend.cap_usd; checked before every request
        # routing.learn: labels, shadow judging, versions (router/learning/); `--no-log` (log=False)
        # opens no file, so it learns nothing either
        self.learner: Learner | None = None
        if self.config.routing.learn is not None and log is not False:
            from router.learning import attach_learning

            self.learner = attach_learning(self)

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
        from router.state.base import state_for

        try:
            # One Redis connection pool per process: rate limits already hold a link to `state.url`.
            shared = state or state_for(self.config, link=self.rate_limits.link)
            problem = shared.attach(self.latency, self.breakers)
        except ConfigError as exc:
            problem = str(exc)
        if problem is None:
            self.shared = shared
            link = getattr(shared, "link", None)
            if link is not None and self.sessions is not None and self.sessions.shared is not None:
                self.sessions.shared.link = link  # one link per state: one outage, one warning
        elif warn:
            _LOG.warning("latency history unavailable (%s); routing on config priors", problem)
        return problem

    async def refresh(self, *, session: str | None = None) -> None:
        """Adopt what other processes learned (latency, open breakers), at most every
        `state.refresh_ms`, and what the fleet knows of `session`. `acomplete` does this itself;
        call it before `astream` or `decide`."""
        if session is not None and self.sessions is not None:
            await self.sessions.load(session)
        # In turn, not gathered: both are no-ops between refreshes, and a gather's tasks would
        # cost every request more than the rare second round trip does.
        await self.shared.refresh()
        await self.rate_limits.refresh()

    def session(self, key: str | None = None) -> Session:
        """One task's calls as one session (router/sessions.py): they keep one backend while it is
        healthy, and the tier only moves up. `key`: the task's own id (default: a new one)."""
        return Session(self, key)

    def state(self) -> dict[str, dict[str, Any]]:
        """Per backend: what the latency model learned and the breaker's state (for `route
        models`, /metrics and agents that want to look before they call)."""
        return {name: {"latency": self.latency.model(name).summary(), "breaker": self.breakers[name].state}
                for name in self.config.backends}

    # -- construction ---------------------------------------------------------------------

    def _build_scorer(self, spec: ScorerConfig | None = None, at: tuple = ("routing", "scorer")) -> Scorer:
        spec = spec or self.config.routing.scorer
        try:
            return build_scorer(spec.kind, **spec.options)
        except (ValueError, TypeError, OSError) as exc:
            raise ConfigError(
                f"{'.'.join(map(str, at))} is invalid: {exc}", path=self.loaded.path, line=self.loaded.line_of(*at)
            ) from None

    def _build_ladder(self) -> Ladder:
        tiers, heads = [], []
        for index, tier in enumerate(self.config.routing.tiers):
            at = ("routing", "tiers", index)
            head = self._build_scorer(tier.scorer, (*at, "scorer")) if tier.scorer is not None else None
            heads.append((f"{head.name} head", head) if head is not None else None)
            below = tier.below
            if below == "calibrated":
                below = getattr(head or self.scorer, "threshold", None)
                if below is None:
                    where = "this tier's scorer.weights" if head else "routing.scorer.weights"
                    raise ConfigError(
                        f"tier {tier.name!r} says `below: calibrated` but the scorer has no calibrated threshold; "
                        "run `route calibrate DATA.jsonl --hosted-share 0.3 --out weights.json` and point "
                        f"{where} at the file, or give a number.",
                        path=self.loaded.path, line=self.loaded.line_of(*at, "below"),
                    )
            tiers.append(Tier(tier.name, below, tuple(tier.backends), tier.deadline_ms, tier.on_deadline_risk))
        return Ladder(tuple(tiers), tuple(heads[:-1]))

    def names(self) -> list[str]:
        """Every name usable as `model`: backends, then consortia."""
        return [*self.config.backends, *self.config.consortia]

    def backend(self, name: str) -> Backend:
        """The backend (or consortium) called `name`, built on first use."""
        backend = self._backends.get(name)
        if backend is not None:
            return backend
        if name in self.config.backends:
            spec = self.config.backends[name]
            backend = build_backend(spec.kind, spec.settings(name))
        elif name in self.config.consortia:
            backend = self._build_consortium(name)
        else:
            raise UsageError(f"unknown model {name!r}.{_did_you_mean(name, self.names())} "
                             f"Configured names: {', '.join(self.names())}. "
                             "Run `route models` to list them.")
        self._backends[name] = backend
        return backend

    def _build_consortium(self, name: str) -> Backend:
        from router.consortium.consortium import Consortium

        # Members and arbiter resolve through self.backend, so a member that is a consortium nests;
        # every call they make goes through self.calls.
        return Consortium(name, self.config.consortia[name], resolve=self.backend, calls=self.calls)

    def add_observer(self, observer: Observer) -> None:
        """Called after every backend attempt anywhere (routed, consortium member or arbiter;
        answered, failed or cancelled), e.g. to learn latency or count metrics."""
        self.calls.add_observer(observer)

    def add_request_observer(self, observer: RequestObserver) -> None:
        """Called once at the end of every routed request (after fallbacks), e.g. by the request log."""
        self._request_observers.append(observer)

    def feedback(self, request_id: str | int, verdict: str) -> None:
        """Record `good` or `bad` for a logged request (its `route log` id or trace id); `route
        calibrate --from-log` learns from these. The caller is the operator: any request may be
        judged. See router/store/feedback.py."""
        from router.store.feedback import record_feedback

        record_feedback(self, request_id, verdict, admin=True)

    def _finish(self, outcome: Outcome) -> None:
        plan = outcome.decision.session
        if plan is not None and self.sessions is not None:
            self.sessions.remember(plan, outcome.result.completion if outcome.result is not None else None)
        for observer in self._request_observers:
            observer(outcome)

    # -- deciding -------------------------------------------------------------------------

    def decide(self, messages: list[Message], *, model: str | None = None, deadline_s: float | None = None,
               max_tokens: int | None = None, prefer: str | None = None, needs: Needs | None = None,
               max_cost_usd: float | None = None, session: str | None = None) -> Decision:
        """Which backends to try, in order, and why. No model call, no I/O.

        Within the scorer's tier, the latency model's predictions pick the backend (see
        policies/selection.py); `Decision.plan` holds each candidate's predicted p50/p95 time
        and cost. `prefer` is fast | cheap | best (default: routing.prefer). `needs` (tools,
        images, context length, a response format; read off the request by acomplete/astream)
        leaves out backends that cannot take the request; Unsupported when none can.
        `max_cost_usd` leaves out candidates predicted to cost more (router/cost_limit.py);
        CostLimitExceeded when none is left. `session` routes the call as part of that task
        (router/sessions.py): its tier only moves up, and it keeps its backend."""
        prefer = self._check_prefer(prefer)
        unable = self._unable(needs)
        self._check_output(unable, needs)
        if model and model != "auto":
            decision = self._decide_forced(model, deadline_s, max_tokens, unable, messages)
        else:
            plan = self.sessions.plan(session, messages) if session and self.sessions is not None else None
            decision = self._decide_routed(messages, deadline_s, max_tokens, prefer, unable, plan)
        if max_cost_usd is None:
            return decision
        from router.cost_limit import within_cost

        return within_cost(self, decision, messages, max_tokens, max_cost_usd)

    def _decide_routed(self, messages: list[Message], deadline_s: float | None, max_tokens: int | None,
                       prefer: Prefer, unable: Mapping[str, str], session: SessionPlan | None = None) -> Decision:
        if session is None:
            score: Score | None = self.scorer.score(messages)
            assert score is not None
            index, crossings = self.ladder.climb(messages, score)
            opening = self.ladder.reason(crossings, score)
        else:  # the task's tier, not the transcript's (router/sessions.py)
            score, index, crossings = session.score, session.index, session.crossings
            opening = f"session {session.key[:24]}: {session.why}"
        tier = self.tiers[index]
        if deadline_s is None:
            deadline_s = _seconds(tier.deadline_ms or self.config.routing.deadline_ms)
        tiers = self._capable_tiers(unable)
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

    def _capable_tiers(self, unable: Mapping[str, str]) -> tuple[Tier, ...]:
        if not unable:
            return self.tiers
        tiers = tuple(dataclasses.replace(t, backends=tuple(b for b in t.backends if b not in unable),
                                          left_out=tuple((b, self._cannot(b, unable[b]))
                                                         for b in t.backends if b in unable))
                      for t in self.tiers)
        if not any(t.backends for t in tiers):
            need = next(iter(unable.values()))
            whys = "; ".join(f"{name} {why}" for t in tiers for name, why in t.left_out)
            raise Unsupported(f"none of the backends `auto` routes to can take this request ({whys}); "
                              f"{self._who_can(unable, need)}", need=need)
        return tiers

    def _who_can(self, unable: Mapping[str, str], need: str) -> str:
        able = [n for n in self.names() if n not in unable]
        hint = f"ask for one that can: {', '.join(able)}" if able else "no configured backend can"
        return f"{hint}, or send the request without {_NEED_WORDS[need]}"

    def _decide_forced(self, model: str, deadline_s: float | None, max_tokens: int | None,
                       unable: Mapping[str, str], messages: list[Message]) -> Decision:
        if model not in self.config.backends and model not in self.config.consortia and model not in self._backends:
            raise UsageError(f"unknown model {model!r}.{_did_you_mean(model, self.names())} "
                             f"Configured names: {', '.join(self.names())}. "
                             "Run `route models` to list them.")
        if model in unable:
            need = unable[model]
            raise Unsupported(f"model {model!r} {self._cannot(model, need)}; {self._who_can(unable, need)}",
                              need=need)
        if deadline_s is None:
            deadline_s = _seconds(self.config.routing.deadline_ms)
        learned = with_queue(self.latency.model(model), self._backends.get(model))  # queue hook
        plan = forced_plan(model, learned.predict(max_tokens))
        return Decision(plan=plan, reason=plan.why, forced=True, deadline_s=deadline_s)

    def _check_prefer(self, prefer: str | None) -> Prefer:
        prefer = prefer or self.config.routing.prefer
        if prefer not in PREFER_CHOICES:
            raise UsageError(f"prefer must be fast, cheap or best (got {prefer!r}): fast picks the quickest backend "
                             "that is good enough, cheap the cheapest that meets the deadline, best the strongest.")
        return prefer

    def _route_inputs(self, tiers: tuple[Tier, ...], messages: list[Message], deadline_s: float | None,
                      max_tokens: int | None, prefer: Prefer, session: SessionPlan | None = None) -> RouteInputs:
        names = fallback_order(tiers, 0)
        states = {name: self.breakers[name].state for name in names}
        settings = self.config.routing.latency
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        tokens = estimate_tokens(messages, max_tokens)  # what a call would take from a backend's tpm
        return RouteInputs(
            # queue hook (router/queueing.py): a backend's own line of requests is part of its prediction
            models={name: with_queue(self.latency.model(name), self._backends.get(name)) for name in names},
            prices=self._prices,
            input_tokens=chars // 4,  # ~4 characters per token: close enough for a cost estimate
            max_tokens=max_tokens,
            deadline_s=deadline_s,
            prefer=prefer,
            cost_tolerance=self.config.routing.cost_tolerance,
            blocked={n for n, st in states.items() if st == "open"},
            half_open={n for n, st in states.items() if st == "half-open"},
            exploring=frozenset(self.latency.exploring),
            now=time.time(),
            stale_after_s=settings.stale_after_ms / 1000,
            explore_rate=settings.explore_rate,
            explore_roll=self._random.random(),
            hedge=self.config.routing.hedge,
            on_deadline_risk=self.config.routing.on_deadline_risk,
            limited={n: refused for n in names if (refused := self.rate_limits.peek(n, tokens)) is not None},
            sticky=session.sticky if session is not None else None,
            cached_tokens=session.cached if session is not None else {},
        )

    def explain(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> Decision:
        """The decision `acomplete` would make for this request, and why; calls no model. Give
        it what the request carries (tools, response_format, images in the messages): they
        decide which backends may take it."""
        opts = resolve_options("Router.explain", options)
        return self._decision(as_messages(prompt_or_messages), opts)

    def _decision(self, messages: list[Message], opts: ResolvedOptions) -> Decision:
        return self.decide(messages, model=opts.model, deadline_s=opts.deadline_s, max_tokens=opts.max_tokens,
                           prefer=opts.prefer, needs=Needs.of(messages, opts.extra, opts.max_tokens),
                           max_cost_usd=opts.max_cost_usd, session=opts.session)

    # -- calling --------------------------------------------------------------------------

    @staticmethod
    def _request(messages: list[Message], opts: ResolvedOptions) -> Request:
        return Request(messages=messages, max_tokens=opts.max_tokens, temperature=opts.temperature, stop=opts.stop,
                       extra=opts.extra)

    async def acomplete(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> RouteResult:
        """Answer with the best backend for this prompt, falling back on failure within the
        deadline. Options: router/options.py (`RouteOptions`); an unknown one is a TypeError."""
        opts = resolve_options("Router.acomplete", options)
        await self.refresh(session=opts.session)
        if self.spend_cap is not None:
            await self.spend_cap.check()
        messages = as_messages(prompt_or_messages)
        decision = self._decision(messages, opts)
        request = self._request(messages, opts)
        started = time.perf_counter()
        try:
            with spending_limit(opts.max_cost_usd):
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
        """A stream whose `.decision` is known before the first chunk and `.result` after the
        last. Options as for `acomplete`."""
        opts = resolve_options("Router.astream", options)
        messages = as_messages(prompt_or_messages)
        decision = self._decision(messages, opts)
        return RouteStream(self, decision, self._request(messages, opts), max_cost_usd=opts.max_cost_usd)

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

        return openai_client(self, **kwargs)

    def async_openai_client(self, **kwargs: Any) -> Any:
        """An `openai.AsyncOpenAI` answered in process by this router (router/inprocess.py)."""
        from router.inprocess import async_openai_client

        return async_openai_client(self, **kwargs)

    def _iterate_sync(self, route_stream: RouteStream) -> Iterator[Chunk]:
        iterator = route_stream.__aiter__()
        while True:
            try:
                yield self._run_sync(anext(iterator))
            except StopAsyncIteration:
                return

    async def aclose(self) -> None:
        if self.learner is not None:
            await self.learner.aclose()
        await self.latency.aflush()  # learned latency reaches the store even when the process ends next
        if self.sessions is not None and self.sessions.shared is not None:
            await self.sessions.shared.aclose()  # the last sessions' states reach the fleet
        await self.shared.aclose()
        for backend in self._backends.values():
            await backend.aclose()
        if self.rate_limits.link is not None:
            await self.rate_limits.link.aclose()  # the same link as a Redis state's: closing twice is harmless

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


def _rate_limits(loaded: Any) -> RateLimiter:
    """Shared by every replica through Redis with `state: backend: redis` (its link is the one
    `persist()` hands the Redis state too), else buckets in this process."""
    config = loaded.config
    link = None
    if config.state.backend == "redis":
        from router.state.redis_link import RedisLink

        link = RedisLink.from_config(config.state, path=loaded.path, line=loaded.line_of("state", "url"))
    return rate_limiter_for(config, link)


def _seconds(ms: float | None) -> float | None:
    return ms / 1000 if ms else None


_NEED_WORDS = {"tools": "`tools`", "vision": "image input", "context": "a prompt this long",
               "structured": "`response_format`", "output": "a `max_tokens` this large"}


class RouteStream:
    """Async iterator of chunks (text, drafts, then one FinalChunk) with fallback before the first text."""

    def __init__(self, router: Router, decision: Decision, request: Request, *, max_cost_usd: float | None = None):
        self.decision = decision
        self.result: RouteResult | None = None
        self._router = router
        self._request = request
        self._max_cost_usd = max_cost_usd

    def __aiter__(self) -> AsyncGenerator[Chunk, None]:
        return self._run()

    async def _run(self) -> AsyncGenerator[Chunk, None]:
        if self._router.spend_cap is not None:
            await self._router.spend_cap.check()
        started = time.perf_counter()
        messages = self._request.messages
        try:
            async for chunk in self._attempt_in_order():
                yield chunk
        except (Exception, asyncio.CancelledError, GeneratorExit) as exc:
            # GeneratorExit: the consumer stopped reading (a client that hung up); log it as cancelled.
            error = asyncio.CancelledError() if isinstance(exc, GeneratorExit) else exc
            self._router._finish(Outcome(self.decision, messages, self._router.source,
                                         time.perf_counter() - started, error=error))
            raise
        self._router._finish(Outcome(self.decision, messages, self._router.source,
                                     time.perf_counter() - started, result=self.result))

    async def _attempt_in_order(self) -> AsyncGenerator[Chunk, None]:
        """Fallback before the first text, hedging and the deadline: see router/execution.py."""
        router = self._router
        router.latency.begin(self.decision)
        executor = Executor(router.calls, hedge=router.config.routing.hedge)

        def keep(result: RouteResult) -> None:
            self.result = result

        try:
            with spending_limit(self._max_cost_usd):
                async with contextlib.aclosing(executor.stream(self.decision, self._request, keep)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            router.latency.end(self.decision)
