"""The one interface every model implements, local or hosted, and the settings it is built from.

A backend implements `stream()`, an async generator of chunks that always ends with a
FinalChunk; `complete()` is written once here on top of it. Backends whose non-streaming call is
cheaper (a plain HTTP POST) override `complete()` too.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from backends.errors import AuthError, MalformedResponse
from backends.types import Chunk, Completion, FinalChunk, Price, Request

__all__ = ["Backend", "BackendSettings", "Decoding"]

Decoding = Literal["autoregressive", "diffusion"]


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """Everything a backend needs from config, as plain values (backends never see the YAML)."""

    name: str
    model: str
    base_url: str | None = None
    # Name of the environment variable holding the key; the key itself is never stored.
    api_key_env: str | None = None
    price: Price = field(default_factory=Price)
    decoding: Decoding = "autoregressive"
    canvas_length: int = 256
    timeout_s: float = 60.0  # per request, retries included, unless the request says less
    max_retries: int = 2
    backoff_initial_s: float = 0.25
    context_window: int | None = None
    # Sent with every request, merged under the request's own `extra`.
    params: dict[str, Any] = field(default_factory=dict)
    # Kind-specific settings (e.g. the diffusion-local engine's device and dtype).
    options: dict[str, Any] = field(default_factory=dict)

    def api_key(self) -> str | None:
        """The key from the environment, read at call time; AuthError if it is configured but unset."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise AuthError(
                f"environment variable {self.api_key_env} is not set; export it with the API key "
                f"for {self.model} (the key is read from the environment only, never from config)",
                backend=self.name,
                model=self.model,
            )
        return key


class Backend(ABC):
    """One model behind one async interface."""

    kind: ClassVar[str]
    can_stream: ClassVar[bool] = True
    supports_tools: ClassVar[bool] = False
    # True for test doubles and the simulator: shown to users wherever the answer appears.
    simulated: ClassVar[bool] = False

    def __init__(self, settings: BackendSettings):
        self.settings = settings

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def model(self) -> str:
        return self.settings.model

    @abstractmethod
    def stream(self, request: Request) -> AsyncIterator[Chunk]:
        """Yield TextChunk (and, for diffusion engines, DraftChunk) items, then one FinalChunk."""

    async def complete(self, request: Request) -> Completion:
        async for chunk in self.stream(request):
            if isinstance(chunk, FinalChunk):
                return chunk.completion
        raise MalformedResponse("stream ended without a final completion", backend=self.name, model=self.model)

    async def aclose(self) -> None:
        """Release connections or engines. Safe to call twice."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"
