"""Thinking text kept out of answers: DiffusionGemma (like Gemma 4) may reason before answering,
between `<|channel>thought\\n` and `<channel|>`; OpenAI-compatible servers with a reasoning parser
send it apart instead, as `reasoning_content` (vLLM; newer releases call it `reasoning`).

Either way the answer a caller, an arbiter or a scorer sees is the text outside those markers;
the reasoning goes to `Completion.thinking` and, in streams, to `ThinkingChunk`s. Pure functions
and one small incremental splitter: no I/O, no project imports beyond the data types.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from backends.types import Chunk, Completion, FinalChunk, TextChunk, ThinkingChunk

__all__ = [
    "CLOSE",
    "KEPT_MARKERS",
    "OPEN",
    "ThinkingSplitter",
    "partial_suffix",
    "reasoning_of",
    "split_chunks",
    "split_thinking",
    "with_thinking",
]

OPEN = "<|channel>"
CLOSE = "<channel|>"
_CHANNEL = "thought"
# Special tokens a decoder must keep in the text for the thinking and tool-call parsers.
KEPT_MARKERS = (OPEN, CLOSE, "<|tool_call>", "<tool_call|>", '<|"|>')
_REASONING_KEYS = ("reasoning_content", "reasoning")


@dataclass
class ThinkingSplitter:
    """Feed text as it arrives; get back ("thinking" | "answer", text) pieces, markers removed.

    A marker split across two pieces is held back until it is complete, so nothing of a marker
    ever leaks into the answer. `close()` flushes what is held (an unclosed thought stays thinking).
    """

    _held: str = ""
    _inside: bool = False
    _channel_pending: bool = False  # just opened: the channel name ("thought\n") is not text

    def feed(self, piece: str) -> list[tuple[str, str]]:
        if not self._held and not self._channel_pending and "<" not in piece:
            # Both markers begin with "<": without one, nothing can open, close or be held.
            return [("thinking" if self._inside else "answer", piece)] if piece else []
        self._held += piece
        out: list[tuple[str, str]] = []
        while True:
            if self._channel_pending and not self._strip_channel():
                break
            marker = CLOSE if self._inside else OPEN
            at = self._held.find(marker)
            if at < 0:
                keep = partial_suffix(self._held, marker)
                self._emit(out, self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep:]
                break
            self._emit(out, self._held[:at])
            self._held = self._held[at + len(marker):]
            self._inside = not self._inside
            self._channel_pending = self._inside
        return out

    def close(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        self._emit(out, self._held)
        self._held = ""
        return out

    def _strip_channel(self) -> bool:
        """Drop the channel name after OPEN; False while too little text has arrived to tell."""
        name = _CHANNEL + "\n"
        if len(self._held) < len(name) and name.startswith(self._held):
            return False
        if self._held.startswith(name):
            self._held = self._held[len(name):]
        elif self._held.startswith(_CHANNEL):
            self._held = self._held[len(_CHANNEL):]
        self._channel_pending = False
        return True

    def _emit(self, out: list[tuple[str, str]], text: str) -> None:
        if text:
            out.append(("thinking" if self._inside else "answer", text))


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that begins `marker` (0 if none)."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def split_thinking(text: str) -> tuple[str, str]:
    """(thinking, answer) of a whole text."""
    splitter = ThinkingSplitter()
    pieces = splitter.feed(text) + splitter.close()
    thinking = "".join(t for kind, t in pieces if kind == "thinking")
    answer = "".join(t for kind, t in pieces if kind == "answer")
    return thinking, answer


def reasoning_of(message: Mapping[str, Any]) -> str:
    """A server-split reasoning text from a response message or a stream delta ("" if none)."""
    for key in _REASONING_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def with_thinking(completion: Completion, reasoning: str = "", *, thinking_tokens: int | None = None) -> Completion:
    """`completion` with thinking split out of its text and joined to `reasoning` (sent apart).

    Thinking tokens are part of the output tokens, as OpenAI counts them: the figure given, else
    the upstream's own (`usage.thinking_tokens`, when it reported one), else an estimate from the
    share of characters.
    """
    inline, answer = split_thinking(completion.text)
    thinking = reasoning + inline
    if not thinking:
        return completion
    usage = completion.usage
    if thinking_tokens is None and usage.thinking_tokens:
        thinking_tokens = usage.thinking_tokens
    if thinking_tokens is None:
        share = len(thinking) / max(1, len(thinking) + len(answer))
        thinking_tokens = round(usage.output_tokens * share)
    usage = replace(usage, thinking_tokens=min(thinking_tokens, usage.output_tokens))
    return replace(completion, text=answer, thinking=thinking, usage=usage)


async def split_chunks(chunks: AsyncIterator[Chunk]) -> AsyncGenerator[Chunk, None]:
    """A stream with thinking split out: TextChunks carrying markers become ThinkingChunk and
    TextChunk pieces; ThinkingChunks already split by the server pass through; the FinalChunk's
    completion gets the same split (its text joined from the raw pieces)."""
    splitter = ThinkingSplitter()
    reasoning: list[str] = []
    async for chunk in chunks:
        if isinstance(chunk, TextChunk):
            for out in _as_chunks(splitter.feed(chunk.text)):
                yield out
        elif isinstance(chunk, ThinkingChunk):
            reasoning.append(chunk.text)
            yield chunk
        elif isinstance(chunk, FinalChunk):
            for out in _as_chunks(splitter.close()):
                yield out
            yield FinalChunk(with_thinking(chunk.completion, "".join(reasoning)))
        else:
            yield chunk


def _as_chunks(pieces: list[tuple[str, str]]) -> Iterator[Chunk]:
    for kind, text in pieces:
        yield ThinkingChunk(text) if kind == "thinking" else TextChunk(text)
