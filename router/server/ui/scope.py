"""Which client key and which protocol a routed request came in by, for the web view.

A request observer sees the router's Outcome, which knows nothing of HTTP. `RequestScope`, the
outermost layer of the app, sends /ui to the view and puts every other HTTP request's ASGI scope
in a context variable; the auth layer inside it later writes the presenting key's *name* into
that same scope (keys.KEY_SCOPE), and the observer, running in the request's own task, reads
both through `who()`.
"""

from __future__ import annotations

import contextvars
from typing import Any

from router.server.keys import KEY_SCOPE
from router.server.protocols import is_gemini

__all__ = ["PROTOCOLS", "RequestScope", "who"]

_SCOPE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("route_ui_scope", default=None)

# Path endings (with or without /v1) -> the protocol's name on the page.
PROTOCOLS = (("/chat/completions", "openai chat"), ("/messages", "anthropic"), ("/responses", "openai responses"))


class RequestScope:
    """Pure ASGI middleware: the current request's scope, for `who()`. `view`: where /ui goes
    (router/server/ui/handlers.py); the view's own requests are not noted."""

    __slots__ = ("app", "view")

    def __init__(self, app: Any, view: Any):
        self.app = app
        self.view = view

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == "/ui" or path.startswith("/ui/"):
            await self.view(scope, receive, send)
            return
        token = _SCOPE.set(scope)
        try:
            await self.app(scope, receive, send)
        finally:
            _SCOPE.reset(token)


def who() -> tuple[str, str | None]:
    """(protocol, client key name or None) of the request being answered; ("python", None)
    outside an HTTP request (the Router used in process)."""
    scope = _SCOPE.get()
    if scope is None:
        return "python", None
    path = scope.get("path", "")
    if is_gemini(path):  # its paths end in the model's method: /v1beta/models/M:generateContent
        return "gemini", scope.get(KEY_SCOPE)
    protocol = next((name for end, name in PROTOCOLS if path.endswith(end)), path)
    return protocol, scope.get(KEY_SCOPE)
