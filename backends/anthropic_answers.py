"""Anthropic Messages answers read as chat-style Deltas, whole or one stream event at a time:
text, tool calls (numbered in the order their blocks start, as chat tool-call deltas are),
thinking with its signature, usage summed into the chat shape (Anthropic's `input_tokens`
counts only what the cache did not serve), stop reasons as finish reasons. Each reader also
keeps the answer's signed and redacted thinking blocks whole, as Anthropic wants them back, and
its tool calls' ids (backends/anthropic_thinking.py remembers the one by the other). Plain data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from backends.anthropic_format import FINISH_REASONS
from backends.assembly import Delta
from backends.types import Usage

__all__ = ["StreamReader", "message_deltas", "message_thinking"]


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _usage(raw: Mapping[str, Any], output_tokens: int | None = None) -> Usage:
    read, write = _count(raw.get("cache_read_input_tokens")), _count(raw.get("cache_creation_input_tokens"))
    return Usage(input_tokens=_count(raw.get("input_tokens")) + read + write,
                 output_tokens=_count(raw.get("output_tokens")) if output_tokens is None else output_tokens,
                 cache_read_tokens=read, cache_write_tokens=write)


def _finish(reason: Any) -> str | None:
    return FINISH_REASONS.get(reason, reason) if isinstance(reason, str) and reason else None


def _sealed(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A thinking block as a client sends it back to Anthropic: signed, or redacted; None for
    thinking without a signature (nothing Anthropic would take back)."""
    if block.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": str(block.get("data", ""))}
    if block.get("type") == "thinking" and block.get("signature"):
        return {"type": "thinking", "thinking": str(block.get("thinking", "")), "signature": str(block["signature"])}
    return None


def _content(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [b for b in body.get("content") or () if isinstance(b, Mapping)]


def message_deltas(body: Mapping[str, Any]) -> list[Delta]:
    """A whole Anthropic message as Deltas: one per thinking block (its text and its own
    signature), one per redacted block, then the text, tool calls, usage and stop reason."""
    content = _content(body)
    out = [_thinking_delta(block) for block in content if block.get("type") in ("thinking", "redacted_thinking")]
    calls = [{"index": i, "id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
             for i, b in enumerate(b for b in content if b.get("type") == "tool_use")]
    usage = body.get("usage")
    out.append(Delta(text="".join(str(b.get("text", "")) for b in content if b.get("type") == "text"),
                     tool_calls=calls, usage=_usage(usage) if isinstance(usage, Mapping) else None,
                     finish_reason=_finish(body.get("stop_reason"))))
    return out


def _thinking_delta(block: Mapping[str, Any]) -> Delta:
    if block.get("type") == "redacted_thinking":
        return Delta(redacted=(str(block.get("data", "")),))
    return Delta(reasoning=str(block.get("thinking", "")), signature=str(block.get("signature") or ""))


def message_thinking(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """A whole message's signed and redacted thinking blocks, in order, and its tool calls' ids."""
    content = _content(body)
    return ([sealed for sealed in map(_sealed, content) if sealed is not None],
            [str(b["id"]) for b in content if b.get("type") == "tool_use" and b.get("id")])


class StreamReader:
    """Folds Anthropic stream events into Deltas, one event at a time."""

    def __init__(self) -> None:
        self._start_usage: Mapping[str, Any] = {}
        self._tools: dict[int, int] = {}  # content block index -> tool call index
        self._thinking: dict[int, list[str]] = {}  # content block index -> its thinking so far
        self.sealed: list[dict[str, Any]] = []  # signed and redacted thinking blocks, whole, in order
        self.tool_ids: list[str] = []

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
        if kind in ("thinking", "redacted_thinking"):
            return self._thinking_start(int(event.get("index") or 0), block)
        if kind != "tool_use":
            return None
        index = self._tools[int(event.get("index") or 0)] = len(self._tools)
        if block.get("id"):
            self.tool_ids.append(str(block["id"]))
        return Delta(tool_calls=[{"index": index, "id": block.get("id"), "type": "function",
                                  "function": {"name": block.get("name"), "arguments": ""}}])

    def _thinking_start(self, index: int, block: Mapping[str, Any]) -> Delta | None:
        if block.get("type") == "redacted_thinking":  # whole in its start: nothing follows
            self.sealed.append({"type": "redacted_thinking", "data": str(block.get("data", ""))})
            return Delta(redacted=(str(block.get("data", "")),))
        self._thinking[index] = [str(block.get("thinking") or "")]
        return Delta(reasoning=str(block["thinking"])) if block.get("thinking") else None

    def _block_delta(self, event: Mapping[str, Any]) -> Delta | None:
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return Delta(text=str(delta["text"]))
        if kind == "thinking_delta" and delta.get("thinking"):
            self._thinking.setdefault(int(event.get("index") or 0), []).append(str(delta["thinking"]))
            return Delta(reasoning=str(delta["thinking"]))
        if kind == "signature_delta" and delta.get("signature"):
            text = "".join(self._thinking.pop(int(event.get("index") or 0), []))
            self.sealed.append({"type": "thinking", "thinking": text, "signature": str(delta["signature"])})
            return Delta(signature=str(delta["signature"]))
        if kind == "input_json_delta" and delta.get("partial_json"):
            index = self._tools.get(int(event.get("index") or 0), 0)
            return Delta(tool_calls=[{"index": index, "function": {"arguments": str(delta["partial_json"])}}])
        return None
