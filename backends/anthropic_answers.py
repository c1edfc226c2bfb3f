"""Anthropic Messages answers read as chat-style Deltas, whole or one stream event at a time:
text, tool calls (numbered in the order their blocks start, as chat tool-call deltas are),
thinking with its signature, usage summed into the chat shape (Anthropic's `input_tokens`
counts only what the cache did not serve), stop reasons as finish reasons. Plain data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from backends.anthropic_format import FINISH_REASONS
from backends.assembly import Delta
from backends.types import Usage

__all__ = ["StreamReader", "message_delta"]


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _usage(raw: Mapping[str, Any], output_tokens: int | None = None) -> Usage:
    read, write = _count(raw.get("cache_read_input_tokens")), _count(raw.get("cache_creation_input_tokens"))
    return Usage(input_tokens=_count(raw.get("input_tokens")) + read + write,
                 output_tokens=_count(raw.get("output_tokens")) if output_tokens is None else output_tokens,
                 cache_read_tokens=read, cache_write_tokens=write)


def _finish(reason: Any) -> str | None:
    return FINISH_REASONS.get(reason, reason) if isinstance(reason, str) and reason else None


def message_delta(body: Mapping[str, Any]) -> Delta:
    """A whole Anthropic message as one Delta."""
    content = [b for b in body.get("content") or () if isinstance(b, Mapping)]
    calls = [{"index": i, "id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
             for i, b in enumerate(b for b in content if b.get("type") == "tool_use")]
    usage = body.get("usage")
    thinking = [b for b in content if b.get("type") == "thinking"]
    return Delta(text="".join(str(b.get("text", "")) for b in content if b.get("type") == "text"),
                 tool_calls=calls, usage=_usage(usage) if isinstance(usage, Mapping) else None,
                 finish_reason=_finish(body.get("stop_reason")),
                 reasoning="".join(str(b.get("thinking", "")) for b in thinking),
                 signature=next((str(b["signature"]) for b in reversed(thinking) if b.get("signature")), ""),
                 redacted=tuple(str(b.get("data", "")) for b in content if b.get("type") == "redacted_thinking"))


class StreamReader:
    """Folds Anthropic stream events into Deltas, one event at a time."""

    def __init__(self) -> None:
        self._start_usage: Mapping[str, Any] = {}
        self._tools: dict[int, int] = {}  # content block index -> tool call index

    def read(self, event: Mapping[str, Any]) -> Delta | None:
        """What one event carries, or None when it carries nothing for the answer."""
        kind = event.get("type")
        if kind == "message_start":
            usage = (event.get("message") or {}).get("usage")
            self._start_usage = usage if isinstance(usage, Mapping) else {}
        elif kind == "content_block_start":
            return self._block_start(event)
        elif kind == "content_block_delta":
            return self._block_delta(event)
        elif kind == "message_delta":
            # message_delta's usage is cumulative; fields it leaves out are message_start's.
            raw = {**self._start_usage, **{k: v for k, v in (event.get("usage") or {}).items() if v is not None}}
            return Delta(usage=_usage(raw), finish_reason=_finish((event.get("delta") or {}).get("stop_reason")))
        return None

    def _block_start(self, event: Mapping[str, Any]) -> Delta | None:
        block = event.get("content_block") or {}
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return Delta(text=str(block["text"]))
        if kind == "thinking" and block.get("thinking"):
            return Delta(reasoning=str(block["thinking"]))
        if kind == "redacted_thinking":
            return Delta(redacted=(str(block.get("data", "")),))
        if kind != "tool_use":
            return None
        index = self._tools[int(event.get("index") or 0)] = len(self._tools)
        return Delta(tool_calls=[{"index": index, "id": block.get("id"), "type": "function",
                                  "function": {"name": block.get("name"), "arguments": ""}}])

    def _block_delta(self, event: Mapping[str, Any]) -> Delta | None:
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return Delta(text=str(delta["text"]))
        if kind == "thinking_delta" and delta.get("thinking"):
            return Delta(reasoning=str(delta["thinking"]))
        if kind == "signature_delta" and delta.get("signature"):
            return Delta(signature=str(delta["signature"]))
        if kind == "input_json_delta" and delta.get("partial_json"):
            index = self._tools.get(int(event.get("index") or 0), 0)
            return Delta(tool_calls=[{"index": index, "function": {"arguments": str(delta["partial_json"])}}])
        return None
