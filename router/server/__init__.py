"""`route serve`: the router as an OpenAI-compatible HTTP endpoint for agents and editors.

    from router.server import create_app, RouteServer
    app = create_app(Router(load_config(), source="server"), api_key=None)

Attributes are imported on first use so that `route --help` never pays for FastAPI.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DEFAULT_BODY_LIMIT", "RouteServer", "api_key_from_env", "create_app", "is_loopback", "serve"]

_HOMES = {
    "DEFAULT_BODY_LIMIT": "router.server.app",
    "create_app": "router.server.app",
    "RouteServer": "router.server.runner",
    "api_key_from_env": "router.server.runner",
    "is_loopback": "router.server.runner",
    "serve": "router.server.runner",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'router.server' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
