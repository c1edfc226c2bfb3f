"""Upstream answers in the shapes providers send, written from an `Answer`, and a loopback
server that sends them cut into pieces wherever a test says.

The shapes follow what OpenAI's chat completions and Anthropic's Messages APIs send, field for
field and event for event, as their API references document and recorded streams show: OpenAI's
first chunk carries the role and an empty content, each tool call opens with its id, type and
whole name and an empty `arguments`, the finish reason comes in a chunk with an empty delta and
the usage (with `stream_options.include_usage`) in a last chunk with no choices, then `[DONE]`;
Anthropic's stream is `message_start` (input usage), then per block `content_block_start`, deltas
(`thinking_delta`, `signature_delta`, `text_delta`, `input_json_delta`), `content_block_stop`,
with a `ping` after the first block starts, then `message_delta` (stop reason, output usage) and
`message_stop`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.answering import serving
from tests.conformance.answer import Answer

__all__ = ["Script", "Upstream", "anthropic_events", "anthropic_message", "openai_chunks", "openai_completion",
           "upstream"]

_OPENAI_STOP = {"end": "stop", "length": "length", "tool": "tool_calls"}
_ANTHROPIC_STOP = {"end": "end_turn", "length": "max_tokens", "tool": "tool_use"}


def _pieces(text: str, size: int = 7) -> list[str]:
    """Text as a provider streams it: a few characters at a time."""
    return [text[i:i + size] for i in range(0, len(text), size)] or []


# -- OpenAI chat completions --------------------------------------------------------------------


def openai_chunks(answer: Answer, model: str) -> bytes:
    base = {"id": "chatcmpl-upstream1", "object": "chat.completion.chunk", "created": 1767225600, "model": model,
            "system_fingerprint": "fp_conformance"}

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        body = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **more}
        return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"reasoning_content": piece}) for piece in _pieces(answer.thinking)]
    out += [chunk({"content": piece}) for piece in _pieces(answer.text)]
    for index, call in enumerate(answer.calls):
        out.append(chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                          "function": {"name": call.name, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(call.arguments, 5)]
    out.append(chunk({}, _OPENAI_STOP[answer.stop]))
    usage = answer.usage
    out.append("data: " + json.dumps({**base, "choices": [], "usage": {
        "prompt_tokens": usage.prompt_total, "completion_tokens": usage.output,
        "total_tokens": usage.prompt_total + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0}}}, separators=(",", ":")) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def openai_completion(answer: Answer, model: str) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None, "refusal": None,
                               "annotations": []}
    if answer.thinking:
        message["reasoning_content"] = answer.thinking
    if answer.calls:
        message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in answer.calls]
    usage = answer.usage
    return json.dumps({
        "id": "chatcmpl-upstream1", "object": "chat.completion", "created": 1767225600, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _OPENAI_STOP[answer.stop]}],
        "usage": {"prompt_tokens": usage.prompt_total, "completion_tokens": usage.output,
                  "total_tokens": usage.prompt_total + usage.output,
                  "prompt_tokens_details": {"cached_tokens": usage.cache_read}},
        "system_fingerprint": "fp_conformance"}).encode()


# -- Anthropic Messages -------------------------------------------------------------------------


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for sealed in answer.sealed:
        if sealed.data is not None:
            blocks.append({"type": "redacted_thinking", "data": sealed.data})
        else:
            blocks.append({"type": "thinking", "thinking": sealed.thinking, "signature": sealed.signature})
    if answer.text:
        blocks.append({"type": "text", "text": answer.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
               for c in answer.calls]
    return blocks


def _anthropic_usage(answer: Answer, output: int) -> dict[str, Any]:
    usage = answer.usage
    return {"input_tokens": usage.input, "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read, "output_tokens": output,
            "service_tier": "standard"}


def anthropic_message(answer: Answer, model: str) -> bytes:
    return json.dumps({"id": "msg_upstream1", "type": "message", "role": "assistant", "model": model,
                       "content": _blocks(answer), "stop_reason": _ANTHROPIC_STOP[answer.stop], "stop_sequence": None,
                       "usage": _anthropic_usage(answer, answer.usage.output)}).encode()


def anthropic_events(answer: Answer, model: str) -> bytes:
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
        "id": "msg_upstream1", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": _anthropic_usage(answer, 1)}})]
    for index, block in enumerate(_blocks(answer)):
        kind = block["type"]
        opening = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
                   "text": {"type": "text", "text": ""},
                   "tool_use": {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}},
                   "redacted_thinking": block}[kind]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        if kind == "thinking":
            events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "thinking_delta", "thinking": piece}})
                       for piece in _pieces(block["thinking"])]
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "signature_delta", "signature": block["signature"]}}))
        elif kind == "text":
            events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": piece}})
                       for piece in _pieces(block["text"])]
        elif kind == "tool_use":
            arguments = json.dumps(block["input"], separators=(",", ":"))
            events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "input_json_delta", "partial_json": piece}})
                       for piece in ["", *_pieces(arguments, 5)]]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": _ANTHROPIC_STOP[answer.stop], "stop_sequence": None},
                                     "usage": {"output_tokens": answer.usage.output}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
                   for name, data in events).encode()


# -- the server ---------------------------------------------------------------------------------


@dataclass
class Script:
    """What the upstream answers next: a status, a body (for a stream, the whole byte stream),
    where to cut a stream into writes (byte offsets), and what to write after a failure."""

    status: int = 200
    body: bytes = b""
    stream: bool = False
    cuts: tuple[int, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)


class Upstream:
    """The loopback upstream: answers every POST with `script`, and keeps the bodies it was sent."""

    def __init__(self) -> None:
        self.script = Script()
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                with upstream.lock:
                    upstream.received.append(json.loads(self.rfile.read(length) or b"{}"))
                    script = upstream.script
                self.send_response(script.status)
                content_type = "text/event-stream" if script.stream and script.status == 200 else "application/json"
                self.send_header("content-type", content_type)
                for name, value in script.headers.items():
                    self.send_header(name, value)
                if not (script.stream and script.status == 200):
                    self.send_header("content-length", str(len(script.body)))
                    self.end_headers()
                    self.wfile.write(script.body)
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                edges = [0, *sorted(c for c in set(script.cuts) if 0 < c < len(script.body)), len(script.body)]
                for start, end in zip(edges, edges[1:]):
                    piece = script.body[start:end]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@contextlib.contextmanager
def upstream() -> Iterator[tuple[Upstream, str]]:
    """An `Upstream` and its base URL (`http://127.0.0.1:PORT/v1`)."""
    up = Upstream()
    with serving(up.handler()) as url:
        yield up, url
