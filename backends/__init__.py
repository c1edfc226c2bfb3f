"""One async Backend interface for every model, and the registry that builds one by kind.

Implementations are imported only when a backend of their kind is built: the litellm and
diffusion-local kinds pull in heavy libraries that `route --help` must never pay for.
"""

from __future__ import annotations

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
    DeadlineAtRisk,
    MalformedResponse,
    RateLimited,
    RateLimitExceeded,
    RouteError,
    Unsupported,
    UsageError,
    Where,
)
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
    Usage,
)

__all__ = [
    "AllBackendsFailed",
    "AtRateLimit",
    "AuthError",
    "Backend",
    "BackendError",
    "BackendSettings",
    "BackendTimeout",
    "BackendUnavailable",
    "BadRequest",
    "BreakerOpen",
    "Capabilities",
    "Chunk",
    "Completion",
    "ConfigError",
    "DeadlineAtRisk",
    "Deadline",
    "Decoding",
    "Delta",
    "DiffusionStats",
    "DraftChunk",
    "FinalChunk",
    "MalformedResponse",
    "Message",
    "Price",
    "RateLimitExceeded",
    "RateLimited",
    "Request",
    "RouteError",
    "TextChunk",
    "ThinkingChunk",
    "Timings",
    "Unsupported",
    "Usage",
    "UsageError",
    "Where",
    "build_backend",
    "kinds",
    "register_kind",
]

from backends.registry import build_backend, kinds, register_kind
