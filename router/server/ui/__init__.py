"""The web view: `route serve`'s dashboard at /ui (docs/guide/web-view.md).

Requests newest first with the reasons for each decision, backends (learned against observed
latency, breakers, rate limits), consortium runs as timelines, learning, and spend against
always-hosted; updated live by polling, signed in with the server's own keys.

`create_app` builds the live view, watches the requests it serves into it (metrics.py `Served`) and
puts `web_view(...)` in front of its layers at /ui:

    live.py      what this process remembers of recent traffic (each served request and attempt)
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
    from router.server.ui.live import LiveView

__all__ = ["web_view"]


def web_view(router: RouterService, live: LiveView, tokens: Mapping[str, str], attempts: KeyAttempts, *,
             body_timeout_s: float | None = None) -> Any:
    """The web view's ASGI app, which the app's outermost layer sends /ui to (app.py `layers`), for the
    keys in `tokens` (name -> key; none: open, as the rest of a loopback server without keys is);
    a sign-in body has `body_timeout_s` to arrive, as the API's bodies do, and a wrong key counts
    against the API's throttle (`attempts`). `live` is what the server's watch of each request
    it serves keeps (router/server/metrics.py `Served`)."""
    from router.server.ui.auth import ViewAuth
    from router.server.ui.handlers import view_app

    return view_app(router, live, ViewAuth(tokens), attempts, body_timeout_s=body_timeout_s)
