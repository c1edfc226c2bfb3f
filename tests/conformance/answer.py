"""What a model said, in no protocol's terms: the unit the differential suite compares.

An upstream stream is written from an `Answer` in a provider's shape (tests/conformance/upstream.py);
what a client receives through route is read back into one in its protocol's terms
(tests/conformance/client.py); the two must be equal but for what `DECLARED` says route
changes on purpose (tests/conformance/declared.py).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

__all__ = ["Answer", "Call", "Sealed", "Usage", "canonical"]


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # the JSON text, as the model wrote it


@dataclass(frozen=True)
class Sealed:
    """A signed thinking block (`signature` set) or a redacted one (`data` set)."""

    thinking: str = ""
    signature: str | None = None
    data: str | None = None


@dataclass(frozen=True)
class Usage:
    """Tokens as Anthropic counts them: `input` excludes cache reads and writes."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def prompt_total(self) -> int:
        """The input as OpenAI counts it: cached tokens included."""
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class Answer:
    text: str = ""
    thinking: str = ""  # the thinking text, all blocks together
    sealed: tuple[Sealed, ...] = ()  # signed or redacted blocks, in order
    calls: tuple[Call, ...] = ()
    stop: str = "end"  # end | length | tool
    usage: Usage = field(default_factory=lambda: Usage(12, 34))


def canonical(answer: Answer) -> Answer:
    """`answer` with each call's arguments as one JSON text: a provider that sends a tool's input
    as an object (Anthropic) and one that sends the model's text (OpenAI) say the same thing in
    different spacing, and a client parses it either way."""
    def arguments(text: str) -> str:
        try:
            return json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)
        except ValueError:
            return text  # not JSON: compared as it is

    return dataclasses.replace(answer, calls=tuple(dataclasses.replace(c, arguments=arguments(c.arguments))
                                                   for c in answer.calls))
