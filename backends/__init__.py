"""One async Backend interface for every model, and the factory that builds one by kind.

Implementations are imported only when a backend of their kind is built: the litellm and
diffusion-local kinds pull in heavy libraries that `route --help` must never pay for.
"""

from __future__ import annotations

import importlib

from backends.base import Backend, BackendSettings, Decoding
from backends.errors import (
    AllBackendsFailed,
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    ConfigError,
    MalformedResponse,
    RateLimited,
    RouteError,
    UsageError,
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
    Timings,
    Usage,
)

__all__ = [
    "BACKEND_KINDS",
    "AllBackendsFailed",
    "AuthError",
    "Backend",
    "BackendError",
    "BackendSettings",
    "BackendTimeout",
    "BackendUnavailable",
    "BadRequest",
    "Chunk",
    "Completion",
    "ConfigError",
    "Decoding",
    "DiffusionStats",
    "DraftChunk",
    "FinalChunk",
    "MalformedResponse",
    "Message",
    "Price",
    "RateLimited",
    "Request",
    "RouteError",
    "TextChunk",
    "Timings",
    "Usage",
    "UsageError",
    "build_backend",
]

# kind -> "module:Class"; the key is what config's `kind:` says.
BACKEND_KINDS: dict[str, str] = {
    "openai": "backends.openai_http:OpenAIBackend",
    "litellm": "backends.litellm_backend:LiteLLMBackend",
    "diffusion-local": "backends.diffusion_local:DiffusionLocalBackend",
    "fake": "backends.fake:FakeBackend",
}


def build_backend(kind: str, settings: BackendSettings) -> Backend:
    try:
        target = BACKEND_KINDS[kind]
    except KeyError:
        raise ConfigError(f"unknown backend kind {kind!r}; use one of: {', '.join(BACKEND_KINDS)}") from None
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(settings)
