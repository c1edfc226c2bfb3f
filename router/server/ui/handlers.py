"""The web view's HTTP side, all under /ui:

    GET  /ui                  the page (static HTML, no data in it)
    GET  /ui/static/...       its script, style sheet and icon (package data; nothing from the internet)
    POST /ui/login            {"key": "..."} -> a session cookie (auth.py); 401 for a wrong key, 413 for
                              a body over 4 KiB, 408 for one slower than the API's body timeout
    POST /ui/logout           forget the cookie
    GET  /ui/api/poll?after=N what changed since request N: new requests and consortium runs, and
                              (when anything changed, or with full=1) every panel; with history=1
                              (a page's first poll) also the latest requests from the request log
                              from before this process recorded for a page (history.py)
    GET  /ui/api/request?seq=N[&ts=&total=&backend=]
                              one request in full (detail.py); ts/total/backend find it in the
                              request log when another process answered it

Who sees what: an admin key (`server.keys.NAME.admin: true`, or the `--api-key-env` key, the
operator's) sees every request; any other key sees only the requests it sent -- in the list, the
consortium runs, a request in full (from memory or the request log) and the spend per key --
beside the server's aggregate figures (backends, spend totals, the log's last hour, learning).
Wrong keys, at sign-in or in a header, are throttled per client address with the API's
(router/server/auth.py: one budget for both).

The page polls about once a second while it is visible. Short requests rather than a held-open
stream: nothing for `route serve`'s drain to wait on at shutdown, and under --workers each
poll is answered whole by one process (`pid` in the answer says which).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from router.server.auth import KeyAttempts, client_address
from router.server.ui.detail import Lookup, request_detail
from router.server.ui.fleet import SlowPanels
from router.server.ui.history import logged_rows
from router.server.ui.panels import backends_panel, cost_panel, sources
from router.server.ui.render import request_row, trace_view
from router.store.feedback import is_admin

if TYPE_CHECKING:
    from router.ports import RouterService
    from router.server.ui.auth import ViewAuth
    from router.server.ui.live import LiveView

__all__ = ["STATIC", "view_app"]

STATIC = Path(__file__).parent / "static"
_ROWS = 100  # newest requests sent per poll
_TRACES = 10
_LOGIN_BYTES = 4096
_PAGE_HEADERS = {
    # Everything the page loads is its own; no inline script or style, no framing.
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "cache-control": "no-cache",
}


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json",
                    headers={"cache-control": "no-store", **(headers or {})})


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json({"error": {"message": message}}, status, headers)


@dataclass(frozen=True, slots=True)
class _Viewer:
    """Who is looking: the key's name (None: a server without keys), and whether it sees every
    key's requests."""

    name: str | None
    admin: bool

    def sees(self, key: str | None) -> bool:
        return self.admin or key == self.name


class _View:
    def __init__(self, router: RouterService, live: LiveView, auth: ViewAuth, attempts: KeyAttempts,
                 body_timeout_s: float | None):
        self.router, self.live, self.auth, self.attempts = router, live, auth, attempts
        self.body_timeout_s = body_timeout_s
        self.slow = SlowPanels(router)

    def viewer(self, request: Request) -> _Viewer | Response:
        """Who signed in (anyone, as an admin, when the server has no keys), or the refusal: 401,
        or 429 for a wrong key from an address (or of a key) out of attempts; a right key always
        signs in. A wrong key in a header counts as an attempt; a cookie that fails (expired, from
        before a key changed) does not: its MAC is no guess."""
        if not self.auth.required:
            return _Viewer(None, True)
        name = self.auth.signed_in(request.headers, request.cookies)
        if name is None:
            given = self.auth.key_in(request.headers)
            refused = self.attempts.wrong(client_address(request.scope), given) if given else None
            if refused is not None:
                return _error(refused.status, refused.message, refused.headers)
            return _error(401, "sign in with one of this server's keys")
        return _Viewer(name, is_admin(self.router.view.config, name))

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=_PAGE_HEADERS)

    async def _body(self, request: Request) -> bytes | Response:
        """A sign-in body, held to a key's size and to the API's body timeout."""
        body = b""
        try:
            async with asyncio.timeout(self.body_timeout_s):
                async for part in request.stream():
                    body += part
                    if len(body) > _LOGIN_BYTES:
                        return _error(413, "a sign-in body is a key, not more than 4 KiB", {"connection": "close"})
        except TimeoutError:
            return _error(408, f"the sign-in body did not arrive within {self.body_timeout_s:g} s "
                               "(route serve --body-timeout)", {"connection": "close"})
        return body

    async def login(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        try:
            given = orjson.loads(body).get("key")
        except (orjson.JSONDecodeError, AttributeError):
            given = None
        if not isinstance(given, str) or not given.strip():
            return _error(400, 'send {"key": "..."}: one of the keys this server accepts')
        if not self.auth.required:
            return Response(status_code=204)
        name = self.auth.name_of_key(given.strip())
        if name is None:
            refused = self.attempts.wrong(client_address(request.scope), given.strip())
            if refused is not None:
                return _error(refused.status, refused.message, refused.headers)
            return _error(401, "not a key this server accepts (the same keys as the API: --api-key-env, server.keys)")
        secure = request.url.scheme == "https"
        return Response(status_code=204, headers={"set-cookie": self.auth.set_cookie(name, secure=secure)})

    async def logout(self, request: Request) -> Response:
        return Response(status_code=204, headers={"set-cookie": self.auth.clear_cookie(secure=request.url.scheme == "https")})

    async def poll(self, request: Request) -> Response:
        viewer = self.viewer(request)
        if isinstance(viewer, Response):
            return viewer
        try:
            after = int(request.query_params.get("after", "0"))
        except ValueError:
            return _error(400, "after must be a request number (0: from the start)")
        live = self.live
        live.watch()
        reset = after > live.seq  # another process, or this one restarted: start over
        after = 0 if reset else after
        body: dict[str, Any] = {"pid": os.getpid(), "seq": live.seq, "now": time.time(), "reset": reset,
                                "auth": {"required": self.auth.required, "key": viewer.name, "admin": viewer.admin},
                                **self._since(after, viewer)}
        if request.query_params.get("history") == "1":
            body["history"] = await asyncio.to_thread(logged_rows, self.router, live.recording_since, _ROWS,
                                                      viewer.sees)
        if after != live.seq or request.query_params.get("full") == "1":
            await self.router.refresh()  # the fleet's learned state and breakers, as a decision would see them
            owner = None if viewer.admin else viewer.name
            body.update(backends=backends_panel(self.router, live), cost=cost_panel(self.router, live, owner),
                        sources=sources(self.router, live), **await self.slow.get())
        return _json(body)

    def _since(self, after: int, viewer: _Viewer) -> dict[str, Any]:
        """The requests and consortium runs after number `after` that `viewer` sees."""
        traces = [e for e in list(self.live.traces)[-_TRACES:] if e.seq > after and viewer.sees(e.key)]
        return {"requests": [request_row(e, self.router.view.redactor) for e in self.live.since(after, _ROWS, viewer.sees)],
                "consortia": [trace_view(e) for e in traces]}

    async def detail(self, request: Request) -> Response:
        viewer = self.viewer(request)
        if isinstance(viewer, Response):
            return viewer
        query = request.query_params
        try:
            entry = self.live.find(int(query.get("seq", "0")))
            lookup = Lookup.of(entry) if entry is not None else Lookup(
                float(query["ts"]), float(query["total"]) if query.get("total") else None, query.get("backend"))
        except (KeyError, ValueError):
            return _error(400, "give seq (and ts, total, backend for a request another process answered)")
        if entry is not None and not viewer.sees(entry.key):
            entry = None  # another key's: as unknown to this one as a request that never was
        found = await asyncio.to_thread(request_detail, self.router, entry, lookup, viewer.sees)
        if found is None:
            return _error(404, "this request is neither in this process's memory nor in the request log")
        return _json(found)


def view_app(router: RouterService, live: LiveView, auth: ViewAuth, attempts: KeyAttempts, *,
             body_timeout_s: float | None = None) -> ExceptionMiddleware:
    """The view's routes. A path or method it does not serve is answered like its API's other
    errors (a JSON 404 or 405), not left to escape as a 500: the view is mounted under the
    server's own dispatch, outside any Starlette application that would catch it."""
    view = _View(router, live, auth, attempts, body_timeout_s)
    return ExceptionMiddleware(_routes(view), handlers={HTTPException: _http_error})


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # the only class it is registered for
    return _error(exc.status_code, f"{exc.detail}: {request.method} {request.url.path} is not part of the web view "
                  "(it serves /ui)", dict(exc.headers or {}))


def _routes(view: _View) -> Router:
    return Router(routes=[
        Route("/ui", view.index, methods=["GET"]),
        Route("/ui/", view.index, methods=["GET"]),
        Mount("/ui/static", StaticFiles(directory=STATIC)),
        Route("/ui/login", view.login, methods=["POST"]),
        Route("/ui/logout", view.logout, methods=["POST"]),
        Route("/ui/api/poll", view.poll, methods=["GET"]),
        Route("/ui/api/request", view.detail, methods=["GET"]),
    ])

