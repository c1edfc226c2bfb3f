"""One async Backend interface for every model, and the registry that builds one by kind.

Implementations are imported only when a backend of their kind is built: the litellm and
diffusion-local kinds pull in heavy libraries that `route --help` must never pay for. The
names below are loaded on first use too, so that importing `backends.errors` (every CLI
command does, for `UsageError`) does not also build the Backend class and its pydantic schemas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backends.assembly import Delta
    from backends.base import Backend, BackendSettings, Decoding
    from backends.capabilities import Capabilities
    from backends.deadline import Deadline
    from backends.errors import (
        AllBackendsFailed,
        AtRateLimit,
        AuthError,
        BackendError,
        BackendTimeout,
        BackendUnavailable,
        BadRequest,
        BreakerOpen,
        ConfigError,
        CostLimitExceeded,
        DeadlineAtRisk,
        Fault,
        MalformedResponse,
        NotServed,
        RateLimited,
        RateLimitExceeded,
        RouteError,
        Unreachable,
        Unsupported,
        UsageError,
        Where,
    )
    from backends.registry import build_backend, kinds, register_kind
    from backends.types import (
        Chunk,
        Completion,
        DiffusionStats,
        DraftChunk,
        FinalChunk,
        Message,
        Price,
        Request,
        TextChunk,
        ThinkingChunk,
        Timings,
        ToolCallChunk,
        Usage,
    )

_HOMES = {
    "backends.assembly": ("Delta",),
    "backends.base": ("Backend", "BackendSettings", "Decoding"),
    "backends.capabilities": ("Capabilities",),
    "backends.deadline": ("Deadline",),
    "backends.errors": (
        "AllBackendsFailed", "AtRateLimit", "AuthError", "BackendError", "BackendTimeout",
        "BackendUnavailable", "BadRequest", "BreakerOpen", "ConfigError", "CostLimitExceeded", "DeadlineAtRisk",
        "Fault", "MalformedResponse", "NotServed", "RateLimited", "RateLimitExceeded", "RouteError", "Unreachable", "Unsupported",
        "UsageError", "Where",
    ),
    "backends.registry": ("build_backend", "kinds", "register_kind"),
    "backends.types": (
        "Chunk", "Completion", "DiffusionStats", "DraftChunk", "FinalChunk", "Message", "Price",
        "Request", "TextChunk", "ThinkingChunk", "Timings", "ToolCallChunk", "Usage",
    ),
}  # fmt: skip
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module 'backends' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
