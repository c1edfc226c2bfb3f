"""The simulator's Anthropic Messages endpoint (`POST /v1/messages`), so the `anthropic` backend
kind is tested over real sockets like the openai one.

It translates the request to chat completions (backends/anthropic_format.py), lets the chat
endpoint answer it -- same profiles, scripts, tool calls, timing and faults -- and rewrites the
answer as it goes out: a chat completion as an Anthropic message, each chat stream chunk as the
Anthropic events it stands for, an error in Anthropic's error shape.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from backends.anthropic_format import STOP_REASONS, Unsupported, chat_messages, chat_tool_choice, chat_tools, tool_input

__all__ = ["Messages"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                500: "api_error", 529: "overloaded_error"}


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: ".encode() + json.dumps({"type": event, **data}).encode() + b"\n\n"


def _chat_body(body: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise ValueError("'messages' must be a list of objects")
    chat: dict[str, Any] = {"model": body.get("model"), "max_tokens": body.get("max_tokens"),
                            "messages": chat_messages(body.get("system"), body["messages"]),
                            "stream": bool(body.get("stream")), "stream_options": {"include_usage": True}}
    for ours, theirs in (("temperature", "temperature"), ("stop", "stop_sequences"), ("seed", "seed")):
        if body.get(theirs) is not None:
            chat[ours] = body[theirs]
    tools = chat_tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        chat["tool_choice"] = chat_tool_choice(body.get("tool_choice"))
    return chat


def _message(chat: dict[str, Any]) -> dict[str, Any]:
    choice = chat["choices"][0]
    message = choice["message"]
    content: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": tool_input(c["function"]["arguments"])} for c in message.get("tool_calls") or ()]
    usage = chat.get("usage") or {}
    return {"id": f"msg_sim_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": chat["model"],
            "content": content, "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
            "stop_sequence": None, "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                                             "output_tokens": usage.get("completion_tokens", 0)}}


def _error(status: int, body: bytes) -> bytes:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace")
    kind = _ERROR_TYPES.get(status, "api_error")
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


class _StreamRewriter:
    """Chat stream chunks in, Anthropic events out. Blocks are numbered in order: the text block
    (if any) first, then one per tool call."""

    def __init__(self) -> None:
        self.started = False
        self.text_block: int | None = None
        self.tool_blocks: dict[int, int] = {}  # chat tool index -> block index
        self.open: int | None = None
        self.blocks = 0
        self.reason: str | None = None

    def rewrite(self, raw: bytes) -> bytes:
        out: list[bytes] = []
        for line in raw.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                out.append(_sse("message_stop", {}))
                continue
            try:
                chunk = json.loads(data)
            except ValueError:
                out.append(line + b"\n\n")  # a simulated malformed event stays malformed
                continue
            out.extend(self._chunk(chunk))
        return b"".join(out)

    def _switch(self, block: int, start: dict[str, Any]) -> list[bytes]:
        out = [_sse("content_block_stop", {"index": self.open})] if self.open is not None else []
        self.open = block
        return [*out, _sse("content_block_start", {"index": block, "content_block": start})]

    def _chunk(self, chunk: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        if not self.started:
            self.started = True
            message: dict[str, Any] = {"id": f"msg_sim_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
                       "model": chunk.get("model"), "content": [], "stop_reason": None, "stop_sequence": None,
                       "usage": {"input_tokens": 0, "output_tokens": 0}}
            out.append(_sse("message_start", {"message": message}))
        for choice in chunk.get("choices") or ():
            out.extend(self._delta(choice.get("delta") or {}))
            self.reason = choice.get("finish_reason") or self.reason
        usage = chunk.get("usage")
        if usage:
            if self.open is not None:
                out.append(_sse("content_block_stop", {"index": self.open}))
                self.open = None
            out.append(_sse("message_delta", {
                "delta": {"stop_reason": STOP_REASONS.get(self.reason or "stop", "end_turn"), "stop_sequence": None},
                "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                          "output_tokens": usage.get("completion_tokens", 0)}}))
        return out

    def _delta(self, delta: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        if delta.get("content"):
            if self.text_block is None:
                self.text_block, self.blocks = self.blocks, self.blocks + 1
                out += self._switch(self.text_block, {"type": "text", "text": ""})
            out.append(_sse("content_block_delta", {"index": self.text_block,
                                                    "delta": {"type": "text_delta", "text": delta["content"]}}))
        for piece in delta.get("tool_calls") or ():
            index = piece.get("index", 0)
            if index not in self.tool_blocks:
                self.tool_blocks[index], self.blocks = self.blocks, self.blocks + 1
                start = {"type": "tool_use", "id": piece.get("id"), "name": piece["function"]["name"], "input": {}}
                out += self._switch(self.tool_blocks[index], start)
            arguments = (piece.get("function") or {}).get("arguments")
            if arguments:
                out.append(_sse("content_block_delta", {"index": self.tool_blocks[index], "delta": {
                    "type": "input_json_delta", "partial_json": arguments}}))
        return out


class Messages:
    """POST /v1/messages in front of the simulator's chat endpoint."""

    def __init__(self, chat: Any):
        self.chat = chat

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            chat = json.dumps(_chat_body(json.loads(raw))).encode()
        except (ValueError, TypeError, Unsupported) as exc:
            await _send(send, 400, _error(400, json.dumps({"error": {"message": str(exc)}}).encode()))
            return
        handed = False

        async def chat_receive() -> Any:
            nonlocal handed
            if handed:
                return await receive()  # the chat endpoint watches for the client leaving
            handed = True
            return {"type": "http.request", "body": chat, "more_body": False}

        await self.chat(scope, chat_receive, _Rewriting(send))


class _Rewriting:
    """The `send` the chat endpoint writes to: rewrites its answer on the way out."""

    def __init__(self, send: Any):
        self.send = send
        self.status = 200
        self.stream: _StreamRewriter | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.parts: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
            if dict(self.headers).get(b"content-type") == b"text/event-stream":
                self.stream = _StreamRewriter()
                await self.send({**message, "headers": self.headers})
            return
        if self.stream is not None:
            await self.send({**message, "body": self.stream.rewrite(message.get("body", b""))})
            return
        self.parts.append(message.get("body", b""))
        if not message.get("more_body"):
            body = b"".join(self.parts)
            if self.status == 200:
                try:
                    body = json.dumps(_message(json.loads(body))).encode()
                except (ValueError, KeyError, TypeError, IndexError):
                    pass  # a simulated malformed body stays malformed
            else:
                body = _error(self.status, body)
            await _send(self.send, self.status, body, [h for h in self.headers if h[0] != b"content-type"])


async def _send(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
