"""OpenAI chat completions (`POST /v1/chat/completions`) as a dialect: the request checked
against its schema (chat_schema.py), answers and stream chunks in its format.

The messages go to the backends as the client sent them (validated, not rebuilt), and so does
every other field the router does not consume itself: each backend kind takes what it can
(backends/openai_http.py, anthropic_format.py; docs/reference/fields.md has the table). Keys a client
adds to an otherwise valid object are accepted and logged at debug, as real clients send them
(an older Codex wrote each tool's `name` beside its `function`). Answers carry
`reasoning_content` beside the content when the model thought (as vLLM's reasoning parsers and
DeepSeek send it) and the provider's signed thinking as `thinking_blocks` (LiteLLM's field:
router/server/protocols/reasoning.py), cached prompt tokens in `prompt_tokens_details`, and route's own facts under
`route` (a downgrade, a degraded consortium), which OpenAI clients keep (the SDK's
`model_extra`). A client that asks for Mercury's `"diffusing": true` gets the whole answer so far
in every event, drafts included.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import BaseModel

from backends.openai_chunks import DONE, ChunkWriter
from backends.types import Completion, ToolCallChunk
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts, bad_request, decode, route_options, session_field, validated
from router.server.protocols.chat_schema import CHAT_REQUEST, ChatCompletionRequest
from router.server.protocols.reasoning import Sealer, sealed_blocks

__all__ = ["ChatDialect", "completion_body", "usage_body"]

_LOG = logging.getLogger("route.server")
_REFERENCE = "the OpenAI chat-completions reference"
# Fields the router itself consumes (or has no use for upstream): every other one is sent on.
# `max_completion_tokens` is both: the limit, and kept as the client wrote it (OpenAI's reasoning
# models refuse `max_tokens`). The Router's own keyword names are never a client's to set.
_CONSUMED = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "temperature", "stop", "n",
                       "deadline_s", "prefer", "max_cost_usd", "session", "extra"})
_TYPED = ("tools", "tool_choice", "response_format", "stream_options")  # objects whose extra keys are logged


def new_completion_id() -> str:
    # 96 random bits, like the 24 hex digits of a uuid4, without a getrandom syscall per
    # request: an id needs to be unique, not unguessable.
    return f"chatcmpl-{random.getrandbits(96):024x}"


def usage_body(completion: Completion) -> dict[str, Any]:
    u = completion.usage
    usage: dict[str, Any] = {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                             "total_tokens": u.total_tokens}
    if u.cache_read_tokens or u.cache_write_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": u.cache_read_tokens}
    if u.cache_write_tokens:  # the field LiteLLM and OpenRouter add for Anthropic's cache writes
        usage["cache_creation_input_tokens"] = u.cache_write_tokens
    if u.thinking_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": u.thinking_tokens}
    return usage


def _message(completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.thinking:
        message["reasoning_content"] = completion.thinking
    sealed = sealed_blocks(completion)
    if sealed:
        message["thinking_blocks"] = sealed  # LiteLLM's field: a client sends them back as they are
    if completion.tool_calls:
        message["tool_calls"] = completion.tool_calls
    return message


def _diffusion(completion: Completion) -> dict[str, Any] | None:
    d = completion.diffusion
    if d is None or d.denoising_steps is None:  # only an engine that counted its steps has facts to give
        return None
    return {"canvases": d.canvases, "denoising_steps": d.denoising_steps, "canvas_length": d.canvas_length,
            "tokens_per_forward": completion.metadata.get("tokens_per_forward", d.tokens_per_forward)}


def completion_body(model: str, completion: Completion, facts: Facts | None = None) -> bytes:
    """The chat.completion object."""
    body: dict[str, Any] = {
        "id": new_completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": _message(completion), "finish_reason": completion.finish_reason or "stop"}],
        "usage": usage_body(completion),
    }
    if facts:
        body["route"] = facts
    if (diffusion := _diffusion(completion)) is not None:
        body["diffusion"] = diffusion  # an extension field; OpenAI clients ignore it
    return orjson.dumps(body)


class _Events:
    """One stream's chunks."""

    __slots__ = ("_chunks", "_usage", "_diffusing", "_committed", "_streamed", "_sealer")

    def __init__(self, call: Call):
        self._chunks = ChunkWriter(call.model, completion_id=new_completion_id())
        self._usage = bool(call.echo.get("include_usage"))
        self._diffusing = bool(call.echo.get("diffusing"))
        self._committed = ""  # with `diffusing`: the text so far, ahead of each draft
        self._streamed: set[int] = set()  # tool calls sent as they formed
        self._sealer = Sealer()

    def start(self) -> bytes:
        return self._chunks.role()

    def text(self, text: str) -> bytes:
        if self._diffusing:
            self._committed += text
            return self._chunks.content(self._committed)
        return self._chunks.content(text)

    def thinking(self, text: str, signature: str | None = None, redacted: str | None = None) -> bytes:
        """The text as `reasoning_content`; a block its signature seals goes whole in the same
        delta, as `thinking_blocks` (router/server/protocols/reasoning.py)."""
        delta: dict[str, Any] = {"reasoning_content": text} if text else {}
        sealed = self._sealer.feed(text, signature, redacted)
        if sealed:
            delta["thinking_blocks"] = sealed
        return self._chunks.delta(delta) if delta else b""

    def draft(self, text: str) -> bytes:
        return self._chunks.content(self._committed + text) if self._diffusing else b""

    def tool_call(self, piece: ToolCallChunk) -> bytes:
        delta: dict[str, Any] = {"index": piece.index, "function": {"arguments": piece.arguments}}
        if piece.index not in self._streamed:  # the first piece says which call it is
            self._streamed.add(piece.index)
            delta.update(id=piece.id, type="function")
            delta["function"]["name"] = piece.name
        return self._chunks.delta({"tool_calls": [delta]})

    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes:
        tail = []
        reason = "stop"
        if completion is not None:
            if self._diffusing:  # the last event holds the answer itself
                tail.append(self._chunks.content(completion.text))
            reason = completion.finish_reason or "stop"
            whole = [{"index": i, **call} for i, call in enumerate(completion.tool_calls or ()) if i not in self._streamed]
            if whole:
                tail.append(self._chunks.delta({"tool_calls": whole}))
            if completion.tool_calls:
                reason = completion.finish_reason or "tool_calls"
        tail.append(self._chunks.finish(reason, {"route": facts} if facts else None))
        if self._usage and completion is not None:
            tail.append(self._chunks.usage(usage_body(completion)))
        tail.append(DONE)
        return b"".join(tail)

    def error(self, err: ApiError) -> bytes:
        return ChunkWriter.error(err.body())


def _log_extra_keys(request: ChatCompletionRequest) -> None:
    if not _LOG.isEnabledFor(logging.DEBUG):
        return
    for name in _TYPED:
        value = getattr(request, name)
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, BaseModel) and item.model_extra:
                where = f"{name}[{index}]" if isinstance(value, list) else name
                _LOG.debug("chat request: %s has keys this router does not know (%s); sent on as written",
                           where, ", ".join(sorted(item.model_extra)))


class ChatDialect:
    """`POST /v1/chat/completions`. `pass_through` (None: every field the router does not
    consume) names the top-level fields sent on to the backend; `route engine serve` names its
    engine's generation settings."""

    protocol = "openai chat"

    def __init__(self, pass_through: Iterable[str] | None = None):
        self.pass_through = None if pass_through is None else frozenset(pass_through)

    def parse(self, raw: bytes) -> Call:
        body = decode(raw, "a chat-completions object with `model` and `messages`")
        request = validated(CHAT_REQUEST, body, _REFERENCE)
        if request.n not in (None, 1):
            raise bad_request("`n` > 1 is not supported; send one request per answer, or use a consortium model", "n")
        if request.stream_options is not None and not request.stream:
            raise bad_request("`stream_options` is only allowed with `stream: true`; drop it, or stream", "stream_options")
        _log_extra_keys(request)
        return self._call(request, body)

    def _sent_on(self, key: str) -> bool:
        return key not in _CONSUMED if self.pass_through is None else key in self.pass_through

    def _call(self, request: ChatCompletionRequest, body: dict[str, Any]) -> Call:
        stop = [request.stop] if isinstance(request.stop, str) else request.stop
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        return Call(
            model=request.model,
            messages=body["messages"],
            stream=bool(request.stream),
            max_tokens=request.max_completion_tokens or request.max_tokens,
            temperature=request.temperature,
            stop=stop or None,
            extra={k: v for k, v in body.items() if v is not None and self._sent_on(k)},
            echo={"include_usage": include_usage, "diffusing": body.get("diffusing") is True},
            session=session_field(body, body.get("prompt_cache_key")),
            route=route_options(body),
        )

    def error_body(self, err: ApiError) -> bytes:
        return err.body()

    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes:
        return completion_body(call.model, completion, facts)

    def writer(self, call: Call) -> _Events:
        return _Events(call)
