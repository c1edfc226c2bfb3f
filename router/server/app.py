"""The `route serve` ASGI app: one endpoint for every protocol, in front of a Router.

    POST /v1/chat/completions   OpenAI chat completions (protocols/chat.py)
    POST /v1/messages           Anthropic Messages (protocols/messages.py)
    POST /v1/messages/count_tokens
    POST /v1/responses          OpenAI Responses, stateless (protocols/responses.py)
    POST /v1beta/models/M:generateContent, :streamGenerateContent, :countTokens
                                Gemini's protocol (protocols/gemini.py), under /v1/models too
    POST /v1/feedback           {"id": request log id or trace id, "verdict": "good" | "bad"}
    GET  /v1/models             auto, every backend and consortium with its capabilities, aliases
    GET  /v1beta/models         the same, in Gemini's shape
    GET  /healthz               liveness (never needs the token)
    GET  /metrics               Prometheus text format
    GET  /ui                    the web view (router/server/ui/, docs/guide/web-view.md)

Every POST goes through one request flow (endpoint.py); the GETs are FastAPI routes. What every
request passes is built once around both (`layers`), outermost first: the last-resort error
answer, bearer auth, per-key limits; then `Dispatch`: the POSTs the one endpoint serves go
straight to it (without Starlette's middleware stack and router, about seven layers, each a
coroutine per request and a wrapper per sent message: the proxy's hot path), anything else to
FastAPI's routes. The web view, when there is one, is sent /ui around all of them: it signs its
page in itself.

Responses say what the router decided: `x-route-backend` (its first choice), `x-route-tier`,
`x-route-score`, `x-route-candidates`; plain answers add `x-route-answered-by`. Errors are in
each API's own shape.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Route

from router.server.auth import BearerAuth, KeyAttempts, send_error_for
from router.server.endpoint import Endpoint, Handler, Plain
from router.server.errors import ApiError, internal_error
from router.server.feedback import feedback_handler
from router.server.heap_trim import HeapTrim, malloc_trim
from router.server.keys import KeyLimits
from router.server.metrics import Metrics, Served
from router.server.models import ModelNames
from router.server.protocols import error_body_for
from router.server.protocols.chat import ChatDialect
from router.server.protocols.gemini import GEMINI_PREFIX, GEMINI_PREFIXES, GeminiRoutes, gemini_listing
from router.server.protocols.messages import MessagesDialect, count_tokens
from router.server.protocols.messages import error_body as messages_error_body
from router.server.protocols.responses import ResponsesDialect
from router.server.ui import web_view
from router.server.ui.live import LiveView

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["DEFAULT_BODY_LIMIT", "Dispatch", "LastResort", "create_app", "layers", "limits_keys", "model_handlers"]

DEFAULT_BODY_LIMIT = 16 * 1024 * 1024  # bytes; an agent's long context with a few images fits


async def _count_tokens(raw: bytes, scope: dict) -> bytes:
    return orjson.dumps({"input_tokens": count_tokens(raw)})


def model_handlers(chat: ChatDialect | None = None) -> dict[str, Handler]:
    """Path -> handler for the protocols; some clients put the /v1 in their base URL, some not."""
    handlers: dict[str, Handler] = {}
    for prefix in ("/v1", ""):
        handlers[f"{prefix}/chat/completions"] = chat or ChatDialect()
        handlers[f"{prefix}/messages"] = MessagesDialect()
        handlers[f"{prefix}/messages/count_tokens"] = Plain(_count_tokens, messages_error_body)
        handlers[f"{prefix}/responses"] = ResponsesDialect()
    return handlers


class _App(FastAPI):
    """FastAPI, with the layers every path passes built once around it (`chain`: `layers`), and
    the POSTs the endpoint serves answered without Starlette's middleware stack and router."""

    chain: Any

    async def __call__(self, scope, receive, send) -> None:
        scope["app"] = self
        await self.chain(scope, receive, send)

    async def through_routes(self, scope, receive, send) -> None:
        """FastAPI's own handling: its routes (the GETs, the web view's), errors and lifespan."""
        await super().__call__(scope, receive, send)


class Dispatch:
    """The innermost layer: the endpoint's POSTs to it, the rest to `routes` (FastAPI's)."""

    __slots__ = ("endpoint", "routes")

    def __init__(self, endpoint: Endpoint, routes: Any):
        self.endpoint = endpoint
        self.routes = routes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path")
                and self.endpoint.serves(scope["path"])):
            await self.endpoint(scope, receive, send)
            return
        await self.routes(scope, receive, send)


class LastResort:
    """An exception before the answer started is answered with a 500 in the path's API shape
    (clients parse it), saying no more than its type; re-raised either way, for the server's log."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if not started:
                await send_error_for(scope, send, internal_error(exc))
            raise



class WebView:
    """The outermost layer when the app has a web view: /ui to it (it signs its page in itself),
    everything else to the API's layers."""

    __slots__ = ("api", "view")

    def __init__(self, api: Any, view: Any):
        self.api = api
        self.view = view

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/ui" or path.startswith("/ui/")):
            await self.view(scope, receive, send)
            return
        await self.api(scope, receive, send)


def limits_keys(router: RouterService, tokens: Mapping[str, str]) -> bool:
    """Whether the server's client keys have rate limits of their own (server.keys.NAME.rpm/tpm)."""
    return bool(tokens) and any(kind == "key" for kind, _ in router.view.rate_limits.limits)


def layers(inner: Dispatch, router: RouterService, tokens: Mapping[str, str], attempts: KeyAttempts, *,
           refused: Callable[[str, str], None], view: Any = None) -> Any:
    """The chain around `inner`: auth and per-key limits when there are keys (`refused(kind,
    name)` hears of each request a key's limit turns away), the last resort always, and the web
    view's /ui around them when there is one."""
    chain: Any = inner
    if tokens:
        if limits_keys(router, tokens):
            # inside the auth: it needs the key's name
            chain = KeyLimits(chain, limiter=router.view.rate_limits, refused=refused)
        chain = BearerAuth(chain, tokens=tokens, attempts=attempts)
    chain = LastResort(chain)
    return chain if view is None else WebView(chain, view)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def create_app(router: RouterService, *, api_key: str | None = None, body_limit_bytes: int = DEFAULT_BODY_LIMIT,
               close_router: bool = True, body_timeout_s: float | None = None,
               api_keys: Mapping[str, str] | None = None, handlers: Mapping[str, Handler] | None = None,
               health: Callable[[], dict[str, Any]] | None = None,
               models: list[dict[str, Any]] | None = None) -> FastAPI:
    """The ASGI app. `api_key` (the token itself, read from the environment by the caller), or
    `api_keys` (name -> token; see keys.py), turns on bearer auth, with per-key rate limits.
    With `close_router`, shutdown closes the router's connections and flushes its request log.
    `body_timeout_s` bounds how long a request body may take to arrive. `handlers` replaces the
    protocols served (path -> dialect; `route engine serve` serves chat completions alone);
    `health` adds to what /healthz says; `models` replaces the listing of GET /v1/models.
    `app.state.metrics` is the Metrics object.

    Built in dependency order, and nothing registered on `router`: the app watches the requests
    it serves (metrics.py `Served`), handing each its watch through the router's request scope."""
    if body_limit_bytes < 1:
        raise ValueError("body_limit_bytes must be positive")
    tokens = _tokens(api_key, api_keys)
    metrics = Metrics(router)
    live = LiveView(router) if handlers is None else None  # route serve, not the engine server: a web view
    served = Served(metrics, live, key_usage=limits_keys(router, tokens))
    names = ModelNames(router)
    models = names.listing() if models is None else models
    paths = _served_paths(router, handlers)
    routed = [GeminiRoutes(prefix) for prefix in GEMINI_PREFIXES] if handlers is None else []
    endpoint = Endpoint(router, served, names, paths, body_limit_bytes=body_limit_bytes, body_timeout_s=body_timeout_s,
                        routed=routed)
    heap = HeapTrim(malloc_trim(), lambda: served.count)
    app = _App(title="route", docs_url=None, redoc_url=None, openapi_url=None,
               lifespan=_lifespan(router, heap, close_router=close_router))
    _route_to_endpoint(app, endpoint, paths, routed)
    _add_routes(app, models, metrics, health)
    if routed:
        _add_gemini_routes(app, models)
    # One throttle on wrong keys for the API and the web view (server.failed_key_rpm).
    attempts = app.state.key_attempts = KeyAttempts(router.view.config.server.failed_key_rpm)
    view = web_view(router, live, tokens, attempts, body_timeout_s=body_timeout_s) if live is not None else None
    app.chain = layers(Dispatch(endpoint, app.through_routes), router, tokens, attempts, refused=metrics.refused,
                       view=view)
    app.state.metrics = metrics
    app.state.router = router
    app.state.heap = heap
    app.state.live_view = live
    return app


def _served_paths(router: RouterService, handlers: Mapping[str, Handler] | None) -> dict[str, Handler]:
    """path -> dialect: `handlers` when given, else every model protocol and the feedback endpoint."""
    if handlers is not None:
        return dict(handlers)
    served = dict(model_handlers())
    served["/v1/feedback"] = feedback_handler(router)
    return served


def _lifespan(router: RouterService, heap: HeapTrim, *,
              close_router: bool) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        trimming = asyncio.create_task(heap.run())
        log = router.view.request_log
        if log is not None:
            log.replay_left()  # records a killed process spooled reach the database now, not at the first request
        yield
        trimming.cancel()
        if close_router:
            await router.aclose()
        if log is not None:
            await asyncio.to_thread(log.flush)

    return lifespan


def _route_to_endpoint(app: FastAPI, endpoint: Endpoint, served: Mapping[str, Handler],
                       routed: list[GeminiRoutes]) -> None:
    # Routes for the endpoint's paths too: an app mounted under a root path reaches them through
    # Starlette's router, and other methods get its 405 (a Route whose endpoint is not a function
    # is mounted as is).
    for path in served:
        app.router.routes.append(Route(path, endpoint, methods=["POST"]))
    for family in routed:
        app.router.routes.append(Route(family.prefix + "{rest:path}", endpoint, methods=["POST"]))


def _tokens(api_key: str | None, api_keys: Mapping[str, str] | None) -> dict[str, str]:
    """name -> token of every key the server accepts (`api_key` alone is named "api-key")."""
    return {**({"api-key": api_key} if api_key else {}), **(api_keys or {})}


def _add_routes(app: FastAPI, models: list[dict[str, Any]], metrics: Metrics,
                health: Callable[[], dict[str, Any]] | None) -> None:
    @app.get("/v1/models")
    async def list_models() -> Response:
        return _json({"object": "list", "data": models})

    @app.get("/v1/models/{name:path}")
    async def get_model(name: str) -> Response:
        for model in models:
            if model["id"] == name:
                return _json(model)
        return Response(ApiError(404, f"unknown model {name!r}", code="model_not_found").body(), status_code=404,
                        media_type="application/json")

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok", "models": len(models), **(health() if health else {})})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.exception_handler(StarletteHTTPException)
    async def shaped(request, exc: StarletteHTTPException) -> Response:
        # Unknown paths and wrong methods answer in the same error shape as everything else.
        err = ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}",
                       code="not_found" if exc.status_code == 404 else "invalid_request")
        return Response(error_body_for(request.url.path, err), status_code=exc.status_code,
                        media_type="application/json", headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal(request, exc: Exception) -> Response:
        return Response(error_body_for(request.url.path, internal_error(exc)), status_code=500,
                        media_type="application/json")


def _add_gemini_routes(app: FastAPI, models: list[dict[str, Any]]) -> None:
    listing = gemini_listing(models)

    @app.get(GEMINI_PREFIX.rstrip("/"))
    async def list_gemini_models() -> Response:
        return _json({"models": listing})

    @app.get(GEMINI_PREFIX + "{name:path}")
    async def get_gemini_model(name: str) -> Response:
        for model in listing:
            if model["name"] == f"models/{name}":
                return _json(model)
        return Response(error_body_for(GEMINI_PREFIX, ApiError(404, f"unknown model {name!r}", code="model_not_found")),
                        status_code=404, media_type="application/json")
