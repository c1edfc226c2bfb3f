"""Turns a provider's wire deltas into chunks and, at the end, the one Completion: written once
here, so a backend kind is only its wire call.

Handles what every provider needs: time to first token, tool calls that arrive in pieces (passed
on as ToolCallChunks as they come, and whole in the Completion), usage
(estimated, and marked so, when the server sends none), cost, diffusion canvases, drafts that
replace the whole answer so far (Mercury's `diffusing` stream), and the simulator's label.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from backends.thinking import ThinkingSplitter, with_thinking
from backends.types import (
    Chunk,
    Completion,
    DiffusionStats,
    DraftChunk,
    FinalChunk,
    TextChunk,
    ThinkingChunk,
    Timings,
    ToolCallChunk,
    Usage,
)

if TYPE_CHECKING:
    from backends.base import Backend

__all__ = ["Assembly", "Delta", "Fold"]


@dataclass(slots=True)
class Delta:
    """One piece of an answer as the provider sent it. `draft` replaces the whole answer so far
    (diffusion drafts); `tool_calls` are OpenAI stream deltas (keyed by `index`, arguments in
    string pieces); a non-streamed reply is one Delta holding everything."""

    text: str = ""
    draft: str | None = None
    reasoning: str = ""  # thinking a server split out itself (`reasoning_content`): never answer text
    signature: str = ""  # the provider's seal on the thinking so far (Anthropic's signature_delta)
    redacted: tuple[str, ...] = ()  # thinking the provider sent encrypted (Anthropic's redacted_thinking)
    tool_calls: Sequence[Mapping[str, Any]] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    simulated: bool = False


class Fold:
    """The Deltas of a run of events (one read of a stream), as few as keep their order: a
    Delta is read as thinking, then text, then tool calls, so consecutive pieces fold into one
    until a piece of an earlier kind follows a later one. Every layer above then handles one
    chunk per read instead of one per token. Usage and the finish reason are whole values (the
    last one wins), so they go on the last Delta."""

    __slots__ = ("_calls", "_out", "_reasoning", "_simulated", "_stage", "_text", "finish", "usage")

    def __init__(self, simulated: bool):
        self._simulated = simulated
        self._out: list[Delta] = []
        self._reasoning: list[str] = []
        self._text: list[str] = []
        self._calls: list[Mapping[str, Any]] = []
        self._stage = 0  # the latest kind held: 1 thinking, 2 text, 3 tool calls, 4 a Delta kept whole
        self.usage: Usage | None = None
        self.finish: str | None = None

    def thinking(self, text: str) -> None:
        if self._stage > 1:
            self._flush()
        self._reasoning.append(text)
        self._stage = 1

    def text(self, text: str) -> None:
        if self._stage > 2:
            self._flush()
        self._text.append(text)
        self._stage = 2

    def calls(self, calls: Sequence[Mapping[str, Any]]) -> None:
        if self._stage > 3:
            self._flush()
        self._calls.extend(calls)
        self._stage = 3

    def delta(self, delta: Delta) -> None:
        """A Delta read some other way: folded in when it is plain pieces, else kept whole
        (drafts replace the answer; a signature seals exactly the thinking before it)."""
        self.usage = delta.usage or self.usage
        self.finish = delta.finish_reason or self.finish
        if delta.draft is not None or delta.signature or delta.redacted:
            self._flush()
            self._out.append(delta)
            self._stage = 4
            return
        if delta.reasoning:
            self.thinking(delta.reasoning)
        if delta.text:
            self.text(delta.text)
        if delta.tool_calls:
            self.calls(delta.tool_calls)

    def _flush(self) -> None:
        if self._stage in (1, 2, 3):
            self._out.append(Delta(text="".join(self._text), reasoning="".join(self._reasoning),
                                   tool_calls=self._calls, simulated=self._simulated))
            self._reasoning, self._text, self._calls = [], [], []
        self._stage = 0

    def done(self) -> list[Delta]:
        """The Deltas, at least one (an event with nothing in it still says the answer is simulated)."""
        self._flush()
        out = self._out or [Delta(simulated=self._simulated)]
        out[-1].usage = self.usage or out[-1].usage
        out[-1].finish_reason = self.finish or out[-1].finish_reason
        return out


@dataclass
class Assembly:
    """What a stream has told us so far, and the Completion it adds up to."""

    backend: Backend
    started: float = field(default_factory=time.perf_counter)  # perf_counter seconds
    parts: list[str] = field(default_factory=list)
    draft: str | None = None
    drafts: int = 0
    usage: Usage | None = None
    finish_reason: str | None = None
    ttft: float | None = None
    simulated: bool = False
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Thinking (backends/thinking.py): sent apart by the server, or inline between markers in the text.
    reasoning: list[str] = field(default_factory=list)
    thinking: ThinkingSplitter = field(default_factory=ThinkingSplitter)
    # Signed and redacted thinking, as blocks a client sends back to the provider that signed them.
    sealed: list[dict[str, Any]] = field(default_factory=list)
    unsealed: int = 0  # where in `reasoning` the thinking not yet signed begins
    pieces: int = 0  # deltas that carried content; from one alone no decode rate can be measured

    def apply(self, delta: Delta) -> list[Chunk]:
        """Fold one delta in; the chunks it produces for the caller."""
        self.usage = delta.usage or self.usage
        self.finish_reason = delta.finish_reason or self.finish_reason
        self.simulated = self.simulated or delta.simulated
        calls = [_merge_tool_call(self.tool_calls, call) for call in delta.tool_calls] if delta.tool_calls else None
        if delta.text or delta.reasoning or calls or delta.draft:
            self.pieces += 1
        if delta.draft:
            self._first_content()
            self.drafts += 1
            self.draft = delta.draft
            return [DraftChunk(delta.draft, step=self.drafts)]
        chunks: list[Chunk] = []
        if delta.reasoning:
            self._first_content()
            self.reasoning.append(delta.reasoning)
            chunks.append(ThinkingChunk(delta.reasoning))
        if delta.signature or delta.redacted:
            chunks += self._seal(delta)
        if delta.text:
            self._first_content()
            self.parts.append(delta.text)  # raw: the completion splits the whole text once more
            chunks += _thinking_chunks(self.thinking.feed(delta.text))
        if calls:
            self._first_content()
            chunks += calls
        return chunks

    def _seal(self, delta: Delta) -> list[Chunk]:
        if delta.signature:
            self.sealed.append({"type": "thinking", "thinking": "".join(self.reasoning[self.unsealed:]),
                                "signature": delta.signature})
            self.unsealed = len(self.reasoning)
        self.sealed += [{"type": "redacted_thinking", "data": data} for data in delta.redacted]
        chunks: list[Chunk] = [ThinkingChunk("", signature=delta.signature)] if delta.signature else []
        return chunks + [ThinkingChunk("", redacted=data) for data in delta.redacted]

    def _first_content(self) -> None:
        if self.ttft is None:
            self.ttft = time.perf_counter() - self.started

    def finish(self) -> list[Chunk]:
        """The last chunks: a diffusing stream's final draft (its only committed text), then the
        FinalChunk."""
        chunks = _thinking_chunks(self.thinking.close())
        if self.draft is not None and not self.parts:
            self.parts.append(self.draft)
            chunks.append(TextChunk(self.draft))
        chunks.append(FinalChunk(self.completion()))
        return chunks

    def completion(self) -> Completion:
        settings = self.backend.settings
        text = "".join(self.parts)
        metadata: dict[str, Any] = {"simulated": True} if self.simulated else {}
        if self.sealed:
            metadata["thinking_blocks"] = self.sealed
        calls = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        usage = _estimated(self.usage, text, calls)
        if usage is not self.usage:
            metadata["usage_estimated"] = True
        diffusion = None
        if settings.decoding == "diffusion":
            canvases = DiffusionStats.canvases_for(usage.output_tokens, settings.canvas_length)
            diffusion = DiffusionStats(canvases=canvases, canvas_length=settings.canvas_length)
        total = time.perf_counter() - self.started
        completion = Completion(
            text=text,
            backend=self.backend.name,
            model=self.backend.model,
            finish_reason=self.finish_reason,
            usage=usage,
            timings=Timings.measure(self.ttft, total, usage.output_tokens, diffusion=diffusion is not None,
                                    whole=self.pieces < 2),
            cost_usd=self.backend.cost(usage),
            diffusion=diffusion,
            tool_calls=calls or None,
            metadata=metadata,
        )
        return with_thinking(completion, "".join(self.reasoning))


def _estimated(usage: Usage | None, text: str, calls: list[dict[str, Any]]) -> Usage:
    """`usage`, or an estimate where a server sent none or counted nothing of an answer that says
    something: the cost still has a figure, and the latency model an answer length. A tool
    call's name and arguments are output like text (about four characters a token)."""
    said = len(text) + sum(len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in calls)
    if usage is not None and (usage.output_tokens or not said):
        return usage
    return replace(usage or Usage(), output_tokens=max(1, said // 4) if said else 0)


def _thinking_chunks(pieces: list[tuple[str, str]]) -> list[Chunk]:
    return [ThinkingChunk(text) if kind == "thinking" else TextChunk(text) for kind, text in pieces]


def _merge_tool_call(calls: dict[int, dict[str, Any]], delta: Mapping[str, Any]) -> ToolCallChunk:
    """Stream deltas carry a tool call in pieces keyed by index; arguments arrive as string parts.
    Returns the piece as the caller sees it."""
    index = int(delta.get("index") or 0)
    slot = calls.setdefault(index, {"type": "function", "function": {"name": "", "arguments": ""}})
    if delta.get("id"):
        slot["id"] = delta["id"]
    function = delta.get("function") or {}
    if function.get("name"):
        slot["function"]["name"] += function["name"]
    if function.get("arguments"):
        slot["function"]["arguments"] += function["arguments"]
    return ToolCallChunk(index, function.get("arguments") or "", id=delta.get("id") or None,
                         name=function.get("name") or None)
