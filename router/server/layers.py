"""What every request to `route serve` passes, outermost first: the last-resort error answer,
bearer auth, per-key limits; then `Dispatch`: the POSTs the one endpoint serves go straight to it
(without Starlette's middleware stack and router, about seven layers, each a coroutine per request
and a wrapper per sent message: the proxy's hot path), anything else to FastAPI's routes. (The web
view, when there is one, is sent /ui around all of them: it signs its page in itself.) Built once
per app by router/server/app.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from router.server.auth import BearerAuth, KeyAttempts, send_error_for
from router.server.errors import internal_error
from router.server.keys import KeyLimits

if TYPE_CHECKING:
    from router.ports import RouterService
    from router.server.endpoint import Endpoint

__all__ = ["Dispatch", "LastResort", "layers", "limits_keys"]


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
