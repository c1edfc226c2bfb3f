"""What a request needs of a backend, read off the request itself: tool calls, image input,
room in the context window, an answer as long as `max_tokens`, and an answer in a given format
(`response_format`). Candidates that lack one are left out before routing (LiteLLM calls these
pre-call checks), so a request never reaches a backend that must refuse it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backends.capabilities import Capabilities
from backends.types import Message

__all__ = ["SMALL_OUTPUT", "Needs"]

# An answer length every model gives: below it no backend's output limit need be looked up.
SMALL_OUTPUT = 4096

_CHARS_PER_TOKEN = 4  # a cheap, conservative-enough estimate: no tokenizer on the routing path


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Needs:
    tools: bool = False
    vision: bool = False
    tokens: int = 0  # prompt plus the longest answer asked for, that the context window must hold
    structured: bool = False  # a `response_format` the answer must follow
    output: int = 0  # the longest answer asked for (max_tokens), that the backend must be able to give

    @classmethod
    def of(cls, messages: Sequence[Message], extra: Mapping[str, Any], max_tokens: int | None) -> Needs:
        chars = 0
        vision = False
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, Mapping):
                        vision = vision or part.get("type") in ("image_url", "input_image", "image")
                        chars += len(str(part.get("text") or ""))
        return cls(tools=bool(extra.get("tools")), vision=vision, tokens=chars // _CHARS_PER_TOKEN + (max_tokens or 0),
                   structured=bool(extra.get("response_format")), output=max_tokens or 0)

    def missing(self, capabilities: Capabilities, context_window: int | None,
                output_limit: int | None = None) -> str | None:
        """What `capabilities` lack for this request, in words; None when it can take it.
        `output_limit` is the longest answer the backend gives (None: not looked up)."""
        if output_limit is not None and self.output > output_limit:
            return "output"
        lacks = {"tools": self.tools and not capabilities.tools,
                 "vision": self.vision and not capabilities.vision,
                 "context": context_window is not None and self.tokens > context_window,
                 "structured": self.structured and not capabilities.structured_output}
        return next((need for need, lacking in lacks.items() if lacking), None)

    def __bool__(self) -> bool:
        return self.tools or self.vision or self.structured or self.tokens > 0 or self.output > 0
