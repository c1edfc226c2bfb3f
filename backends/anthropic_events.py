"""Anthropic's Messages stream, written: message_start, then per content block
content_block_start / _delta / _stop, then message_delta (stop reason, usage) and message_stop.
`route serve`'s /v1/messages and the simulator's write their streams with it.

Blocks are numbered in the order they open; a block closes when another opens (text, thinking
and tool calls each have their own), as Anthropic's own streams never interleave blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["MessageEvents", "sse"]


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps({"type": event, **data}) + b"\n\n"


class MessageEvents:
    """One stream's events, from the pieces of an answer as they come."""

    def __init__(self, model: str, message_id: str, usage: Mapping[str, Any]):
        self.model, self.id, self._start_usage = model, message_id, dict(usage)
        self.blocks = 0  # blocks opened so far
        self._open: tuple[str, Any] | None = None  # (kind, key) of the open block
        self._tools: dict[int, int] = {}  # tool-call index -> its block

    def start(self) -> bytes:
        message: dict[str, Any] = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": self._start_usage}
        return sse("message_start", {"message": message})

    def _switch(self, kind: str, key: Any, block: Mapping[str, Any]) -> list[bytes]:
        """Close the open block unless it is (kind, key); open the new one with `block`."""
        if self._open == (kind, key):
            return []
        out = self._close()
        self._open = (kind, key)
        self.blocks += 1
        return [*out, sse("content_block_start", {"index": self.blocks - 1, "content_block": block})]

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        self._open = None
        return [sse("content_block_stop", {"index": self.blocks - 1})]

    def text(self, text: str) -> bytes:
        head = self._switch("text", None, {"type": "text", "text": ""})
        return b"".join([*head, sse("content_block_delta", {"index": self.blocks - 1,
                                                            "delta": {"type": "text_delta", "text": text}})])

    def thinking(self, text: str, signature: str | None = None) -> bytes:
        """More thinking; a `signature` ends the thinking block it seals."""
        out = self._switch("thinking", None, {"type": "thinking", "thinking": "", "signature": ""})
        if text:
            out.append(sse("content_block_delta", {"index": self.blocks - 1,
                                                   "delta": {"type": "thinking_delta", "thinking": text}}))
        if signature:
            out.append(sse("content_block_delta", {"index": self.blocks - 1,
                                                   "delta": {"type": "signature_delta", "signature": signature}}))
            out += self._close()  # the next thinking, if any, is a block of its own
        return b"".join(out)

    def redacted_thinking(self, data: str) -> bytes:
        """A block of thinking the provider sent encrypted: whole, in its start event."""
        out = self._switch("redacted_thinking", data, {"type": "redacted_thinking", "data": data})
        out += self._close()
        return b"".join(out)

    def tool_call(self, index: int, *, call_id: str | None = None, name: str | None = None,
                  arguments: str = "") -> bytes:
        """A piece of tool call `index`: its first piece opens the block (id and name), later
        pieces carry more of its JSON input."""
        out: list[bytes] = []
        if index not in self._tools:  # providers send one call's pieces together, never interleaved
            block: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            out += self._switch("tool", index, block)
            self._tools[index] = self.blocks - 1
        if arguments:
            out.append(sse("content_block_delta", {"index": self._tools[index],
                                                   "delta": {"type": "input_json_delta", "partial_json": arguments}}))
        return b"".join(out)

    def finish(self, stop_reason: str, usage: Mapping[str, Any]) -> bytes:
        out = self._close()
        out += [sse("message_delta", {"delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                      "usage": dict(usage)}),
                sse("message_stop", {})]
        return b"".join(out)

    @staticmethod
    def error(kind: str, message: str) -> bytes:
        return sse("error", {"error": {"type": kind, "message": message}})
