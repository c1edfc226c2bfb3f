"""Latency-aware LLM router and consortium orchestrator: the public Python API.

    from router import Router
    router = Router.from_config()          # the config search order, or a path / dict
    result = router.complete("Why is the sky blue?")
    print(result.text, result.decision.chosen, result.completion.cost_usd)

Attributes are imported on first use so that `route --help` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "AllBackendsFailed",
    "Attempt",
    "BackendError",
    "ConfigError",
    "Decision",
    "RouteError",
    "RouteResult",
    "RouteStream",
    "Router",
    "UsageError",
    "load_config",
]

_HOMES = {
    "Router": "router.core",
    "RouteStream": "router.core",
    "Attempt": "router.decision",
    "Decision": "router.decision",
    "RouteResult": "router.decision",
    "load_config": "router.config_loader",
    "AllBackendsFailed": "backends.errors",
    "BackendError": "backends.errors",
    "ConfigError": "backends.errors",
    "RouteError": "backends.errors",
    "UsageError": "backends.errors",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'router' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
