"""The `route serve` ASGI app: an OpenAI-compatible endpoint in front of a Router.

    POST /v1/chat/completions   stream and not; `model` is `auto`, a backend or a consortium
    POST /v1/feedback           {"id": request log id or trace id, "verdict": "good" | "bad"}
    POST /v1/messages           the Anthropic Messages API, translated (anthropic_protocol.py)
    POST /v1/messages/count_tokens
    POST /v1/responses          the OpenAI Responses API, stateless (responses_protocol.py)
    GET  /v1/models             auto, every backend and consortium with its capabilities, aliases
    GET  /healthz               liveness (never needs the token)
    GET  /metrics               Prometheus text format

Responses say what the router decided: `x-route-backend` (its first choice), `x-route-tier`,
`x-route-score`, `x-route-candidates`; plain answers add `x-route-answered-by`. Errors are
in each API's own shape: OpenAI's `{"error": {"message", "type", "param", "code"}}`, Anthropic's
`{"type": "error", "error": {"type", "message"}}` under /v1/messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from router.server.chat import ChatCompletions, send_error
from router.server.feedback import feedback_endpoint
from router.server.keys import KEY_SCOPE, KeyLimits, record_key_usage
from router.server.metrics import Metrics
from router.server.models import ModelNames
from router.server.routes import add_translated_routes, shaped_for
from router.server.wire import ApiError
from router.store.records import CLIENT_KEY

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["DEFAULT_BODY_LIMIT", "create_app"]

DEFAULT_BODY_LIMIT = 16 * 1024 * 1024  # bytes; an agent's long context with a few images fits
_OPEN_PATHS = frozenset({"/healthz"})
_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


class _BearerAuth:
    """Pure ASGI middleware: every path but /healthz needs `Authorization: Bearer <token>` (or
    `x-api-key: <token>`, as Anthropic clients send it) with one of the server's keys; the name
    of the key goes into the scope (keys.KEY_SCOPE) for its rate limits. Compared in constant
    time, so response timing says nothing about a token."""

    def __init__(self, app, tokens: Mapping[str, str]):
        self.app = app
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] not in _OPEN_PATHS and not self._allowed(scope):
            await send_error(send, shaped_for(scope["path"], ApiError(
                401, "missing or wrong API key: send `Authorization: Bearer <key>` or `x-api-key: <key>` with the "
                     "key held in the environment variable `route serve --api-key-env` names",
                kind="authentication_error", code="invalid_api_key")))
            return
        CLIENT_KEY.set(scope.get(KEY_SCOPE))  # for the request's record; each request runs in a task of its own
        await self.app(scope, receive, send)

    def _allowed(self, scope) -> bool:
        for header, value in scope["headers"]:
            given: bytes | None = None
            if header == b"authorization":
                scheme, _, bearer = value.partition(b" ")
                given = bearer.strip() if scheme.lower() == b"bearer" else None
            elif header == b"x-api-key":
                given = value.strip()
            if given is None:
                continue
            for name, token in self._tokens:
                if hmac.compare_digest(given, token):
                    scope[KEY_SCOPE] = name
                    return True
        return False


class _Internal:
    """What the app's outermost layer (Starlette's ServerErrorMiddleware with the `internal`
    handler below) does for an endpoint that bypasses the middleware stack: an exception before
    the answer started is answered with a 500 in the API's shape, and re-raised for the
    server's log either way."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        started = False

        async def sending(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if not started:
                await send_error(send, _internal_error(exc))
            raise


def _internal_error(exc: Exception) -> ApiError:
    # A bug must still answer in the API's shape (clients parse it), and say no more than its type.
    return ApiError(500, f"internal error: {type(exc).__name__}", kind="server_error", code="internal_error")


class _App(FastAPI):
    """FastAPI, but a POST to a path in `direct` goes straight to its ASGI app: the proxy's hot
    path skips Starlette's middleware stack and router (about seven layers, each a coroutine per
    request and a wrapper per sent message), which the direct app replaces with exactly the
    layers it needs (_Internal, and the same auth and key limits)."""

    direct: dict[str, Any]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            app = self.direct.get(scope["path"])
            if app is not None:
                scope["app"] = self
                await app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def create_app(router: Router, *, api_key: str | None = None, body_limit_bytes: int = DEFAULT_BODY_LIMIT,
               close_router: bool = True, body_timeout_s: float | None = None,
               api_keys: Mapping[str, str] | None = None) -> FastAPI:
    """The ASGI app. `api_key` (the token itself, read from the environment by the caller), or
    `api_keys` (name -> token; see keys.py), turns on bearer auth, with per-key rate limits. With `close_router`, shutdown closes the router's connections and flushes
    its request log. `body_timeout_s` bounds how long a request body may take to arrive.
    `app.state.metrics` is the Metrics object."""
    if body_limit_bytes < 1:
        raise ValueError("body_limit_bytes must be positive")
    metrics = Metrics(router)
    router.add_request_observer(metrics.observe)
    router.add_observer(metrics.attempt)
    chat = ChatCompletions(router, metrics, body_limit_bytes=body_limit_bytes, body_timeout_s=body_timeout_s)
    names = ModelNames(router)
    models = names.listing()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        if close_router:
            await router.aclose()
        log = getattr(router, "request_log", None)
        if log is not None:
            await asyncio.to_thread(log.flush)

    app = _App(title="route", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    # The chat endpoint is a raw ASGI app (a Route whose endpoint is not a function is mounted as is).
    # Served directly (_App.direct); the routes remain for the router's 405 on other methods.
    for path in _CHAT_PATHS:
        app.router.routes.append(Route(path, chat, methods=["POST"]))
    add_translated_routes(app, router, metrics, names, body_limit_bytes=body_limit_bytes)

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

    @app.post("/v1/feedback")
    async def feedback(request: Request) -> Response:
        return await feedback_endpoint(router, request)

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok", "models": len(models)})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.exception_handler(StarletteHTTPException)
    async def openai_shaped(request, exc: StarletteHTTPException) -> Response:
        # Unknown paths and wrong methods answer in the same error shape as everything else.
        body = shaped_for(request.url.path, ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}",
                          code="not_found" if exc.status_code == 404 else "invalid_request")).body()
        return Response(body, status_code=exc.status_code, media_type="application/json", headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal(request, exc: Exception) -> Response:
        return Response(_internal_error(exc).body(), status_code=500, media_type="application/json")

    direct: Any = _Internal(chat)
    tokens = {**({"api-key": api_key} if api_key else {}), **(api_keys or {})}
    if tokens:
        if any(kind == "key" for kind, _ in router.rate_limits.limits):
            router.add_request_observer(record_key_usage)
            app.add_middleware(KeyLimits, limiter=router.rate_limits)  # inside the auth: it needs the key's name
            direct = KeyLimits(direct, limiter=router.rate_limits)
        app.add_middleware(_BearerAuth, tokens=tokens)
        direct = _BearerAuth(direct, tokens=tokens)
    app.direct = {path: direct for path in _CHAT_PATHS}
    app.state.metrics = metrics
    app.state.router = router
    return app
