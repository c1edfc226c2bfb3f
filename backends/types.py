"""Data types shared by every backend, policy and the router. No I/O, no project imports.

Times are seconds (floats from `time.perf_counter` differences); money is US dollars; prices
are dollars per million tokens, the unit every provider publishes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "Chunk",
    "Completion",
    "DiffusionStats",
    "DraftChunk",
    "FinalChunk",
    "Message",
    "Price",
    "Request",
    "TextChunk",
    "ThinkingChunk",
    "Timings",
    "ToolCallChunk",
    "Usage",
    "as_messages",
    "content_text",
    "last_user_text",
]

Message = dict[str, Any]  # OpenAI chat format: {"role": ..., "content": ...}; tools pass through


def as_messages(prompt_or_messages: str | list[Message]) -> list[Message]:
    """A bare prompt becomes one user turn; a message list is returned as is."""
    if isinstance(prompt_or_messages, str):
        return [{"role": "user", "content": prompt_or_messages}]
    return list(prompt_or_messages)


def last_user_text(messages: list[Message]) -> str:
    """Text of the last user turn (content parts joined), or "" when there is none."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def content_text(content: Any) -> str:
    """Plain text of an OpenAI `content` field, which may be a string or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(parts)


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Request:
    """What to ask a backend. `timeout_s` is the whole request's deadline, retries included."""

    messages: list[Message]
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    timeout_s: float | None = None
    # Provider-specific parameters sent verbatim (diffusion settings, tools, seed...).
    extra: dict[str, Any] = field(default_factory=dict)

    def with_options(self, **changes: Any) -> Request:
        return replace(self, **changes)

    def with_timeout(self, timeout_s: float | None) -> Request:
        """This request with `timeout_s`: what every attempt sends, built without replace()'s
        walk over the fields."""
        return Request(self.messages, self.max_tokens, self.temperature, self.stop, timeout_s, self.extra)


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Usage:
    """Tokens, as OpenAI counts them: `input_tokens` is every prompt token, the ones the
    provider's prompt cache served (`cache_read_tokens`) or stored (`cache_write_tokens`)
    included; Anthropic, which reports the three apart, is summed into this shape on the way in
    and split again on the way out."""

    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0  # the part of output_tokens spent reasoning before the answer (as OpenAI counts)
    cache_read_tokens: int = 0  # the part of input_tokens read from the prompt cache (billed at its price)
    cache_write_tokens: int = 0  # the part of input_tokens written to it (Anthropic bills these above input)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.thinking_tokens + other.thinking_tokens, self.cache_read_tokens + other.cache_read_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens. The cache prices are None when unknown: such tokens are then
    priced as input (backends/prices.py fills them in from litellm's price map where it can)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def cost(self, usage: Usage) -> float:
        read = self.input_per_mtok if self.cache_read_per_mtok is None else self.cache_read_per_mtok
        write = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return (usage.uncached_input_tokens * self.input_per_mtok + usage.cache_read_tokens * read
                + usage.cache_write_tokens * write + usage.output_tokens * self.output_per_mtok) / 1e6

    @property
    def caches_known(self) -> bool:
        return self.cache_read_per_mtok is not None and self.cache_write_per_mtok is not None


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Timings:
    """Seconds from sending the request. `decode_tps` is output tokens per second after the
    first token (None when it cannot be measured, e.g. a single chunk)."""

    ttft_s: float | None = None
    total_s: float = 0.0
    decode_tps: float | None = None

    @classmethod
    def measure(cls, ttft_s: float | None, total_s: float, output_tokens: int, *, diffusion: bool = False,
                whole: bool = False) -> Timings:
        """For a diffusion engine, text arrives a whole canvas at a time, so a rate "after the first
        token" is meaningless: its decode rate is output tokens over the whole generation. An
        answer that came `whole` (unstreamed, or in one piece) has no time after its first token
        to divide by: no rate (the microseconds of parsing would give 70,000 tok/s)."""
        decode_s = total_s if diffusion else total_s - (ttft_s or 0.0)
        measurable = output_tokens > 1 and decode_s > 1e-6 and (diffusion or not whole)
        tps = output_tokens / decode_s if measurable else None
        return cls(ttft_s=ttft_s, total_s=total_s, decode_tps=tps)


@dataclass(frozen=True, slots=True)
class DiffusionStats:
    """What a diffusion engine reports. A canvas is a block of `canvas_length` token slots
    denoised together; output length is a whole number of canvases."""

    canvases: int
    denoising_steps: int | None = None
    canvas_length: int = 256

    @property
    def tokens_per_forward(self) -> float | None:
        if not self.denoising_steps:
            return None
        return self.canvases * self.canvas_length / self.denoising_steps

    @staticmethod
    def canvases_for(tokens: int, canvas_length: int = 256) -> int:
        return max(1, math.ceil(tokens / canvas_length))


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Completion:
    """A finished answer from one backend (or from a consortium acting as one)."""

    text: str
    backend: str
    model: str
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    timings: Timings = field(default_factory=Timings)
    cost_usd: float = 0.0
    diffusion: DiffusionStats | None = None
    # Tool calls and other structured output, in OpenAI format, passed through untouched.
    tool_calls: list[dict[str, Any]] | None = None
    # Reasoning the model did before answering (never part of `text`); None when it did none.
    thinking: str | None = None
    # Free-form facts a wrapper wants to hand up (a consortium's trace, the simulator label).
    metadata: dict[str, Any] = field(default_factory=dict)


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class TextChunk:
    """Committed text, in order; concatenating every TextChunk gives the final text."""

    text: str
    kind: Literal["text"] = "text"


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class ThinkingChunk:
    """Reasoning text, in order, before the answer. Never part of the final text. `signature`:
    the provider's seal on the thinking so far (Anthropic's), which a client must send back
    with it; it ends that piece of thinking. `redacted`: a whole block of thinking the provider
    sent encrypted (Anthropic's `redacted_thinking` data), opaque, to be sent back as it came
    (its `text` is empty)."""

    text: str
    kind: Literal["thinking"] = "thinking"
    signature: str | None = None
    redacted: str | None = None


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class DraftChunk:
    """An intermediate diffusion canvas: the whole current draft, replaced by the next one.
    For display only: never part of the final text."""

    text: str
    step: int
    canvas: int = 0
    kind: Literal["draft"] = "draft"


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class ToolCallChunk:
    """A piece of a tool call as it forms. `index` says which call (a reply may make several);
    a call's first piece carries its `id` and `name`, later pieces add to its `arguments` (JSON
    text, split anywhere). Joined per index, the pieces are the FinalChunk's
    `Completion.tool_calls`, which always holds every call whole."""

    index: int
    arguments: str = ""
    id: str | None = None
    name: str | None = None
    kind: Literal["tool_call"] = "tool_call"


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class FinalChunk:
    """Always the last item of a stream: the same Completion a plain call returns."""

    completion: Completion
    kind: Literal["final"] = "final"


Chunk = TextChunk | ThinkingChunk | DraftChunk | ToolCallChunk | FinalChunk
