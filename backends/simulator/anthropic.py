"""The simulator's Anthropic Messages endpoint (`POST /v1/messages`), so the `anthropic` backend
kind is tested over real sockets like the openai one.

It translates the request to chat completions (backends/anthropic_format.py), lets the chat
endpoint answer it -- same profiles, scripts, tool calls, timing and faults -- and rewrites the
answer as it goes out: a chat completion as an Anthropic message, each chat stream chunk as the
Anthropic events it stands for, an error in Anthropic's error shape. With thinking on, the answer
starts with signed thinking, and Anthropic's rules for thinking are kept (simulator/thinking.py).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from backends.anthropic_events import MessageEvents
from backends.anthropic_format import STOP_REASONS, Unsupported, chat_messages, chat_tool_choice, chat_tools, tool_input
from backends.simulator.refusals import refusal_body, refused_field
from backends.simulator.thinking import Signer, budget_refusal, thinking_on

__all__ = ["Messages"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                500: "api_error", 529: "overloaded_error"}
_THOUGHT_WORDS = 12  # a thought's length when the profile sets no `thinking_tokens`


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


def _message(chat: dict[str, Any], thinking: list[dict[str, Any]]) -> dict[str, Any]:
    choice = chat["choices"][0]
    message = choice["message"]
    content: list[dict[str, Any]] = [*thinking]
    content += [{"type": "text", "text": message["content"]}] if message.get("content") else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": tool_input(c["function"]["arguments"])} for c in message.get("tool_calls") or ()]
    return {"id": f"msg_sim_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": chat["model"],
            "content": content, "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
            "stop_sequence": None, "usage": _usage(chat.get("usage") or {}, Signer.tokens(thinking))}


def _usage(chat: dict[str, Any], thought: int = 0) -> dict[str, int]:
    """Chat usage in Anthropic's shape: the cached part of the prompt apart from the rest, and
    the thinking in the output, as Anthropic bills it."""
    cached = int((chat.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {"input_tokens": int(chat.get("prompt_tokens") or 0) - cached, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0, "output_tokens": int(chat.get("completion_tokens") or 0) + thought}


def _error(status: int, body: bytes) -> bytes:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace")
    kind = _ERROR_TYPES.get(status, "api_error")
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


class _StreamRewriter:
    """Chat stream chunks in, Anthropic events out (backends/anthropic_events.py). The chat
    endpoint is always asked for usage, which ends the message."""

    def __init__(self, thinking: list[dict[str, Any]]) -> None:
        self.events: MessageEvents | None = None
        self.reason: str | None = None
        self.thinking = thinking

    def rewrite(self, raw: bytes) -> bytes:
        out: list[bytes] = []
        for line in raw.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                continue  # message_stop went out with the usage
            try:
                chunk = json.loads(data)
            except ValueError:
                out.append(line + b"\n\n")  # a simulated malformed event stays malformed
                continue
            out.extend(self._chunk(chunk))
        return b"".join(out)

    def _chunk(self, chunk: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        if self.events is None:
            self.events = MessageEvents(chunk.get("model") or "", f"msg_sim_{uuid.uuid4().hex[:20]}",
                                        {"input_tokens": 0, "output_tokens": 0})
            out.append(self.events.start())
            out += [self.events.redacted_thinking(b["data"]) if b["type"] == "redacted_thinking"
                    else self.events.thinking(b["thinking"], b["signature"]) for b in self.thinking]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                out.append(self.events.text(delta["content"]))
            for piece in delta.get("tool_calls") or ():
                function = piece.get("function") or {}
                out.append(self.events.tool_call(piece.get("index", 0), call_id=piece.get("id"),
                                                 name=function.get("name"), arguments=function.get("arguments") or ""))
            self.reason = choice.get("finish_reason") or self.reason
        usage = chunk.get("usage")
        if usage:
            out.append(self.events.finish(STOP_REASONS.get(self.reason or "stop", "end_turn"),
                                          _usage(usage, Signer.tokens(self.thinking))))
        return out


class Messages:
    """POST /v1/messages in front of the simulator's chat endpoint (`chat.state`: its SimState)."""

    def __init__(self, chat: Any):
        self.chat = chat

    async def _refused(self, body: dict[str, Any], scope: Any, send: Any) -> bool:
        """Refuse, as Anthropic would, a request carrying a field its model's profile refuses
        (refusals.py); the chat endpoint never sees it, so it is counted here."""
        state = self.chat.state
        model = str(body.get("model"))
        profile = state.profile(model)
        field = refused_field(profile.refuses, body, scope["headers"]) if profile.refuses else None
        if field is None:
            return False
        state.count(model, "requests")
        status, refusal = refusal_body(field, profile.refusal, anthropic=True, headers=scope["headers"])
        await _send(send, status, json.dumps(refusal).encode())
        state.count(model, "completed")
        return True

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            body = json.loads(raw)
            chat = json.dumps(_chat_body(body)).encode()
            thinking = self._thinking(body)
        except (ValueError, TypeError, Unsupported) as exc:
            await _send(send, 400, _error(400, json.dumps({"error": {"message": str(exc)}}).encode()))
            return
        if await self._refused(body, scope, send):
            return
        handed = False

        async def chat_receive() -> Any:
            nonlocal handed
            if handed:
                return await receive()  # the chat endpoint watches for the client leaving
            handed = True
            return {"type": "http.request", "body": chat, "more_body": False}

        await self.chat(scope, chat_receive, _Rewriting(send, thinking))

    def _thinking(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The answer's signed thinking; ValueError, with Anthropic's words, for a request its
        rules for thinking refuse."""
        state = self.chat.state
        model = str(body.get("model"))
        profile = state.profile(model)
        refusal = budget_refusal(body) or (state.signer.refusal(body) if profile.signed_thinking else None)
        if refusal is not None:
            raise ValueError(refusal)
        if not thinking_on(body):
            return []
        budget = (body.get("thinking") or {}).get("budget_tokens")
        words = min(profile.thinking_tokens or _THOUGHT_WORDS, budget if isinstance(budget, int) else _THOUGHT_WORDS)
        return state.signer.blocks(model, body, body["messages"], words)


class _Rewriting:
    """The `send` the chat endpoint writes to: rewrites its answer on the way out."""

    def __init__(self, send: Any, thinking: list[dict[str, Any]]):
        self.send = send
        self.thinking = thinking
        self.status = 200
        self.stream: _StreamRewriter | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.parts: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
            if dict(self.headers).get(b"content-type") == b"text/event-stream":
                self.stream = _StreamRewriter(self.thinking)
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
                    body = json.dumps(_message(json.loads(body), self.thinking)).encode()
                except (ValueError, KeyError, TypeError, IndexError):
                    pass  # a simulated malformed body stays malformed
            else:
                body = _error(self.status, body)
            await _send(self.send, self.status, body, [h for h in self.headers if h[0] != b"content-type"])


async def _send(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
