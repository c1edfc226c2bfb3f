"""`route serve`: the router as an OpenAI-compatible HTTP endpoint for agents and editors.

    from router.server import create_app, RouteServer
    app = create_app(Router(load_config(), source="server", clients_retry=True), api_key=None)

Attributes are imported on first use so that `route --help` never pays for FastAPI.
"""

from __future__ import annotations

from router.lazy import lazy_exports

__all__ = ["DEFAULT_BODY_LIMIT", "RouteServer", "ServerLimits", "api_key_from_env", "create_app", "is_loopback", "serve"]

_HOMES = {
    "DEFAULT_BODY_LIMIT": "router.server.app",
    "create_app": "router.server.app",
    "RouteServer": "router.server.runner",
    "ServerLimits": "router.server.limits",
    "api_key_from_env": "router.server.runner",
    "is_loopback": "router.server.runner",
    "serve": "router.server.runner",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
