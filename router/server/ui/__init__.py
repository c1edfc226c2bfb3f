"""The web view: `route serve`'s dashboard at /ui (docs/guide/web-view.md).

Requests newest first with the reasons for each decision, backends (learned against observed
latency, breakers, rate limits), consortium runs as timelines, learning, and spend against
always-hosted; updated live by polling, signed in with the server's own keys.

The app mounts it with one call, `mount_ui(app, router, tokens)`, in `create_app`:

    live.py      what this process remembers of recent traffic (request and attempt observers)
    scope.py     which key and protocol a request came in by
    auth.py      sign-in: key -> HttpOnly, SameSite=Strict cookie
    handlers.py  the /ui routes
    render.py, reasons.py, timeline.py, detail.py, panels.py, fleet.py, learning.py
                 the page's JSON
    static/      index.html, app.js, style.css: no build step, nothing from the internet
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.ports import RouterService
    from router.server.auth import KeyAttempts

__all__ = ["mount_ui"]


def mount_ui(app: Any, router: RouterService, tokens: Mapping[str, str], attempts: KeyAttempts, *,
             body_timeout_s: float | None = None) -> None:
    """Serve the web view at /ui on `app` (the `route serve` app), for the keys in `tokens`
    (name -> key; none: open, as the rest of a loopback server without keys is); a sign-in
    body has `body_timeout_s` to arrive, as the API's bodies do, and a wrong key counts against
    the API's throttle (`attempts`).

    Registers a request and an attempt observer on `router`, and puts the outermost layer around
    the app's chain of layers (`app.chain`, which every request passes): the /ui routes, and each
    request's scope for who()."""
    from router.server.ui.auth import ViewAuth
    from router.server.ui.handlers import view_app
    from router.server.ui.live import LiveView
    from router.server.ui.scope import RequestScope

    live = LiveView(router)
    router.add_request_observer(live.observe)
    router.add_observer(live.attempt)
    view = view_app(router, live, ViewAuth(tokens), attempts, body_timeout_s=body_timeout_s)
    app.chain = RequestScope(app.chain, view=view)
    app.state.live_view = live
