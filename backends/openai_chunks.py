"""OpenAI's chat-completions stream, written: `chat.completion.chunk` SSE events, built from
pre-encoded byte templates around orjson-encoded values, because a stream sends one per token
and this is the hot path of every server here (`route serve`, `route engine serve`, the
simulator). The output is the exact JSON OpenAI clients parse.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["DONE", "ChunkWriter"]

DONE = b"data: [DONE]\n\n"


class ChunkWriter:
    """Encodes one stream's events. `fields` are added to every event beside id, object,
    created and model (a `system_fingerprint`, or `"usage": null` as OpenAI sends it until the
    last event when usage was asked for)."""

    __slots__ = ("_head", "_prefix", "_suffix", "_usage_head")

    def __init__(self, model: str, *, completion_id: str, created: int | None = None,
                 fields: Mapping[str, Any] | None = None):
        base = {"id": completion_id, "object": "chat.completion.chunk",
                "created": int(time.time()) if created is None else created, "model": model, **(fields or {})}
        self._head = b"data: " + orjson.dumps(base)[:-1]  # without the closing brace: the choices follow
        base.pop("usage", None)  # the usage event carries the real one
        self._usage_head = b"data: " + orjson.dumps(base)[:-1]
        self._prefix = self._head + b',"choices":[{"index":0,"delta":{"content":'
        self._suffix = b'},"logprobs":null,"finish_reason":null}]}\n\n'

    def role(self) -> bytes:
        return self.delta({"role": "assistant", "content": ""})

    def content(self, text: str) -> bytes:
        return self._prefix + orjson.dumps(text) + self._suffix

    def delta(self, delta: Mapping[str, Any]) -> bytes:
        """Any other delta: `reasoning_content`, tool-call pieces (`{"tool_calls": [...]}`)."""
        return (self._head + b',"choices":[{"index":0,"delta":' + orjson.dumps(delta)
                + b',"logprobs":null,"finish_reason":null}]}\n\n')

    def finish(self, reason: str | None, extra: Mapping[str, Any] | None = None) -> bytes:
        """The last choice event; `extra` adds top-level fields to it (route's own facts)."""
        tail = b"," + orjson.dumps(dict(extra))[1:-1] if extra else b""
        return (self._head + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":'
                + orjson.dumps(reason or "stop") + b"}]" + tail + b"}\n\n")

    def usage(self, usage: Mapping[str, Any]) -> bytes:
        return self._usage_head + b',"choices":[],"usage":' + orjson.dumps(usage) + b"}\n\n"

    @staticmethod
    def error(body: bytes) -> bytes:
        """An error object (already encoded) as an event: what is left to say once text went out."""
        return b"data: " + body + b"\n\n"
