"""The Router: the Python API. Scores a prompt, picks backends, calls them with fallback.

    router = Router.from_config("config.yaml")
    result = await router.acomplete("Prove that sqrt(2) is irrational")
    print(result.text, result.decision.chosen)

`complete()` and `stream()` are thin sync wrappers for scripts; inside async code use the `a`
versions (the wrappers refuse to run inside a running event loop).

A Router is a thin front over its request scope (router/scope.py: decide, admit, call or stream,
finish), which every entry point shares. Within the scorer's tier, `router.latency` (live
per-backend latency models) and `router.breakers` decide which backend goes first
(router/deciding.py, policies/selection.py); router/execution.py runs the attempts.
`Router.from_config(..., persist=True)` shares them beyond this Router, as `state:` says
(router/state/): with the processes of this machine through its SQLite store, or with every
replica through Redis.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from backends.base import Backend
from backends.errors import UsageError
from backends.types import Chunk, Message, as_messages
from policies.ladder import Tier
from policies.routing_model import RoutingModel
from policies.scoring import Scorer
from router.config_loader import LoadedConfig, load_config
from router.deciding import Needs
from router.decision import Attempt, Decision, Outcome, RouteResult, Watch
from router.interrupt import run_interruptibly
from router.options import RouteOptions, resolve_options
from router.scope import RouteStream
from router.sessions import Session
from router.state.base import SharedState
from router.state.rate_limits import RateLimiter
from router.view import RouterView
from router.wiring import wire

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
                 source: str = "api", log: bool | None = None, rate_limits: RateLimiter | None = None,
                 secret_variables: Iterable[str] = (), clients_retry: bool = False,
                 observers: Iterable[Observer] = (), request_observers: Iterable[RequestObserver] = (),
                 persist: bool | SharedState = False):
        """Every part is built here, once (router/wiring.py `wire`: its arguments). `observers`
        are called after every backend attempt anywhere (routed, consortium member or arbiter;
        answered, failed or cancelled); `request_observers` once at the end of every request
        (after fallbacks). To watch one request instead, hand it a `watch` (router/decision.py).

        `persist` shares learned state (latency, breakers) as `state:` says -- the local store
        (default) or Redis -- or through the SharedState given, made by the caller: consecutive
        processes and replicas learn together. When it cannot be used, `persist_problem` says
        why, and routing runs on config priors and what this Router learns. Redis being down is
        no such reason: a Redis state runs on this process's own state until Redis answers
        (router/state/redis_state.py)."""
        # The request scope every entry point goes through (router/scope.py): the server and the
        # adapters call it directly; this Router is a front over it.
        scope = self.scope = wire(loaded, backends=backends, source=source, log=log, rate_limits=rate_limits,
                                  secret_variables=secret_variables, clients_retry=clients_retry,
                                  observers=observers, request_observers=request_observers, persist=persist)
        parts = self._parts = scope.parts
        self.view = RouterView(parts)  # what the server and its web view read (router/ports.py)
        self.loaded, self.config, self.source = loaded, loaded.config, source
        # The parts agents and tools look at (`route models`, /metrics, tests): read-only views.
        self.calls, self.breakers, self.latency = parts.calls, parts.breakers, parts.latency
        self.redactor, self.rate_limits, self.sessions = parts.redactor, parts.rate_limits, parts.sessions
        self.request_log, self.spend_cap, self.learner = parts.request_log, parts.spend_cap, parts.learner
        self.persist_problem = parts.persist_problem
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._in_process_app: Any = None  # the server app in-process clients talk to, built on first use

    @classmethod
    def from_config(cls, source: str | Any | dict | None = None, *, persist: bool = False, **kwargs: Any) -> Router:
        """From a path, a dict, or (None) the config search order. `persist` loads what earlier
        runs learned (latency) from the local store and saves back to it, so consecutive
        processes learn together; an unusable store leaves routing on config priors, with a warning."""
        router = cls(load_config(source), persist=persist, **kwargs)
        router.warn_unshared()
        return router

    def warn_unshared(self) -> None:
        """One logged warning when learned state could not be shared as asked (`persist_problem`)."""
        if self.persist_problem is not None:
            _LOG.warning("latency history unavailable (%s); routing on config priors", self.persist_problem)

    @property
    def shared(self) -> SharedState:
        """How learned state is shared (router/state/): in memory unless the Router was built with `persist=`."""
        return self.view.shared

    @property
    def model(self) -> RoutingModel:
        """The routing model deciding now (scorer, tiers, boundaries; its `version`)."""
        return self.view.model

    @property
    def scorer(self) -> Scorer:
        return self.view.model.scorer

    @property
    def tiers(self) -> tuple[Tier, ...]:
        return self.view.tiers

    async def refresh(self, *, session: str | None = None) -> None:
        """Adopt what other processes learned (latency, open breakers), at most every
        `state.refresh_ms`, and what the fleet knows of `session`. Every call and stream does
        this itself before it decides; call it before `decide` or `explain`."""
        await self.scope.refresh(session=session)

    def session(self, key: str | None = None) -> Session:
        """One task's calls as one session (router/sessions.py): they keep one backend while it is
        healthy, and the tier only moves up. `key`: the task's own id (default: a new one)."""
        return Session(self, key)

    def state(self) -> dict[str, dict[str, Any]]:
        """Per backend: what the latency model learned and the breaker's state (for `route
        models`, /metrics and agents that want to look before they call)."""
        return self.view.state()

    def names(self) -> list[str]:
        """Every name usable as `model`: backends, then consortia."""
        return self.view.names()

    def backend(self, name: str) -> Backend:
        """The backend (or consortium) called `name`, built on first use."""
        return self.view.backend(name)

    @property
    def verdicts(self) -> Feedback:
        """Verdicts on logged requests and the rules for who may give them (router/store/feedback.py)."""
        return self._parts.feedback()

    def feedback(self, request_id: str | int, verdict: str) -> None:
        """Record `good` or `bad` for a logged request (its `route log` id or trace id); learning
        and `route calibrate --from-log` learn from these. The caller is the operator: any
        request may be judged (router/store/feedback.py)."""
        self._parts.feedback().record(request_id, verdict, admin=True)

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
        decider = self.scope.decider
        key = decider.session_key(session, messages, tools)
        return decider.decide_by(messages, model, deadline_s, max_tokens, prefer, needs, max_cost_usd, key, tools)

    def explain(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> Decision:
        """The decision `acomplete` would make for this request, and why; calls no model. Give
        it what the request carries (tools, response_format, images in the messages): they
        decide which backends may take it."""
        opts = resolve_options("Router.explain", options)
        messages = as_messages(prompt_or_messages)
        return self.scope.decide(messages, opts, self.scope.session_key(opts, messages))

    # -- calling --------------------------------------------------------------------------

    async def acomplete(self, prompt_or_messages: str | list[Message], *, watch: Watch | None = None,
                        **options: Unpack[RouteOptions]) -> RouteResult:
        """Answer with the best backend for this prompt, falling back on failure within the
        deadline. Options: router/options.py (`RouteOptions`); an unknown one is a TypeError.
        `watch` (router/decision.py) sees every upstream attempt made for this request and its
        outcome."""
        return await self.scope.acomplete(prompt_or_messages, watch=watch, **options)

    def astream(self, prompt_or_messages: str | list[Message], *, watch: Watch | None = None,
                **options: Unpack[RouteOptions]) -> RouteStream:
        """A stream of chunks whose `.result` is known after the last. It admits and decides as
        a call does, when iteration starts (after adopting what other processes learned);
        `await stream.start()` does so without reading a chunk, and `.decision` is then known."""
        return self.scope.astream(prompt_or_messages, watch=watch, **options)


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
        """The server's app over this router, built once (it watches the requests it serves)."""
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
