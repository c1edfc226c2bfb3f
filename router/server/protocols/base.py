"""What every protocol dialect is: a parser from its request body to a `Call` in the router's
terms, and writers of the router's answer -- whole, as stream events, as an error -- in its own
shape. The request flow that uses them is written once (router/server/endpoint.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from backends.types import Completion, Message, ToolCallChunk
from router.server.errors import ApiError

__all__ = ["Call", "Dialect", "EventWriter", "Facts"]

Facts = dict[str, Any]  # what the router adds about an answer (a downgrade, a degraded consortium)


@dataclass(slots=True)
class Call:
    """A request of some protocol in the router's terms. `extra` goes to the backend with the
    request (tools, response_format, ...); `echo` is the dialect's own: what its answer repeats
    back or needs to write it (the Responses API echoes instructions and tools)."""

    model: str
    messages: list[Message]
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    echo: dict[str, Any] = field(default_factory=dict)
    session: str | None = None  # the task's id, as the protocol names it (prompt_cache_key, metadata.user_id)
    route: dict[str, Any] = field(default_factory=dict)  # route's own fields: deadline_s, prefer, max_cost_usd

    def options(self, model: str, session: str | None = None) -> dict[str, Any]:
        """The router's call options for this request, routed as `model` within `session`."""
        return dict(model=model, max_tokens=self.max_tokens, temperature=self.temperature, stop=self.stop,
                    extra=self.extra, session=session, **self.route)


class EventWriter(Protocol):
    """One stream's events, as bytes ready to send. `draft` may return b"": only a client that
    asked for diffusion drafts gets them. `thinking`'s signature is the provider's seal on the
    thinking so far, `redacted` a whole block of thinking the provider sent encrypted: each
    protocol hands them to the client in its own shape, so that they come back with the next
    call (router/server/protocols/reasoning.py). Tool calls stream as they form (`tool_call`);
    `finish` writes whole those that did not stream."""

    def start(self) -> bytes: ...
    def text(self, text: str) -> bytes: ...
    def thinking(self, text: str, signature: str | None = None, redacted: str | None = None) -> bytes: ...
    def draft(self, text: str) -> bytes: ...
    def tool_call(self, piece: ToolCallChunk) -> bytes: ...
    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes: ...
    def error(self, err: ApiError) -> bytes: ...


class Dialect(Protocol):
    """One API's wire format; `protocol` is its name where a person reads it (the web view)."""

    protocol: str

    def parse(self, raw: bytes) -> Call: ...
    def error_body(self, err: ApiError) -> bytes: ...
    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes: ...
    def writer(self, call: Call) -> EventWriter: ...
