"""Anthropic's Messages API over HTTP directly: Claude without litellm's import (seconds and
hundreds of MB). The chat-format request is written as a Messages request and the answer read
back as Deltas by backends/anthropic_format.py; the POST, the SSE loop and error mapping are the
shared HTTP transport's (backends/http_transport.py), as for the openai kind, its sibling.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar
from urllib.parse import urlsplit

import orjson

from backends.anthropic_answers import StreamReader, message_deltas, message_thinking
from backends.anthropic_format import request_options, request_parts
from backends.anthropic_thinking import SignedThinking, unsigned_tool_turn, without_thinking
from backends.assembly import Delta, Fold
from backends.base import Backend, BackendSettings, Health
from backends.capabilities import Capabilities
from backends.client_fields import beta_refusal, settled
from backends.deadline import Deadline
from backends.errors import BackendError, MalformedResponse, Where
from backends.faults import client_header, failed_writing, refused, stream_error
from backends.http_transport import HttpTransport, Reply, check_finished, json_event
from backends.params import AnthropicParams
from backends.prices import COUNTED_BETAS, with_long_context
from backends.types import Request, Usage

__all__ = ["AnthropicBackend"]

_DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
_VERSION = "2023-06-01"
_STRUCTURED_OUTPUTS = "structured-outputs-2025-11-13"
# The API requires max_tokens; a request or `params:` usually sets it. Without either, this is
# the answer's, and a thinking budget for `reasoning_effort` comes on top of it.
_DEFAULT_MAX_TOKENS = 4096
# Chat parameters the Messages API takes under the same name; others (seed, response_format...) it
# has no word for, and the rest it names differently (request_options).
_SHARED = ("top_p",)


def _messages_path(base: str) -> str:
    """`/messages` under a base that ends in /v1 (ours: `https://api.anthropic.com/v1`), else
    `/v1/messages`, as Anthropic's SDK and LiteLLM take a base (`ANTHROPIC_BASE_URL`) without it."""
    return "/messages" if urlsplit(base).path.rstrip("/").endswith("/v1") else "/v1/messages"


class AnthropicBackend(Backend):
    kind = "anthropic"
    # No seed: N samples of one Claude model differ by temperature alone.
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True, vision=True)
    params_model = AnthropicParams
    wire_task = False  # aiohttp releases a connection without awaiting (Backend.wire_task)

    def __init__(self, settings: BackendSettings):
        super().__init__(settings)
        # For messages: as configured, so a ${NAME} in it never shows its value.
        base = settings.base_url or _DEFAULT_BASE_URL
        self._http = HttpTransport(base.rstrip("/") + _messages_path(base), self.where())
        self._path = None if "${" in base else _messages_path(base)  # else resolved per call
        self._signed = SignedThinking()  # for clients that send thinking back without its signature

    @property
    def endpoint(self) -> str:
        return self._http.shown

    def _messages_url(self) -> str:
        path = self._path or _messages_path(self.settings.resolve(self.settings.base_url or _DEFAULT_BASE_URL))
        return self.settings.url(path, _DEFAULT_BASE_URL)

    def _translate(self, exc: Exception) -> BackendError:
        return self._http.translate(exc)

    def cost(self, usage: Usage) -> float:
        # Past 200k input tokens Anthropic bills the long-context price, which a client's
        # context-1m beta opens: counted, so a tenant's beta is on its own bill (backends/prices.py).
        return with_long_context(super().cost(usage), usage, self.settings.price.output_per_mtok, self.kind)

    def _configured_betas(self) -> list[str]:
        headers = self.settings.resolve(self.settings.headers)
        return [b for name, value in headers.items() if name.lower() == "anthropic-beta" for b in value.split(",")]

    def _headers(self, request: Request | None = None) -> dict[str, str]:
        headers = {"anthropic-version": _VERSION, **self.settings.resolve(self.settings.headers)}
        betas = _betas(request, self.where())
        if betas:  # the client's beta features, and structured output when a schema is asked for
            configured = [b for b in headers.get("anthropic-beta", "").split(",") if b]
            headers["anthropic-beta"] = ",".join(dict.fromkeys([*configured, *betas]))
        key = self.settings.api_key()
        return {**headers, "x-api-key": key} if key else headers

    def _payload(self, request: Request, *, stream: bool) -> dict[str, Any]:
        """The request as a Messages body, under the config's fields (backends/client_fields.py:
        what the config sets, the config decides, translated fields included)."""
        configured, fixed = self.settings.configured()
        payload: dict[str, Any] = {**configured, **{k: request.extra[k] for k in _SHARED if k in request.extra}}
        payload.update(request_parts(self._signed.restore(request.messages), request.extra, self._configured_betas()))
        limit = fixed.get("max_tokens") or request.max_tokens or configured.get("max_tokens")
        payload.update(request_options(request.extra, limit))
        if request.temperature is not None:
            payload["temperature"] = min(1.0, request.temperature)  # Anthropic's range is 0..1
        if request.stop:
            payload["stop_sequences"] = request.stop
        settled(payload, fixed)
        # After the operator's fields: thinking that `params:` turns on is thinking too, and a
        # tool turn whose signed thinking was lost must go without it whoever turned it on.
        _thinking(payload, limit)
        payload["model"] = self.model
        if stream:
            payload["stream"] = True
        return _unsampled_while_thinking(payload)

    async def check(self, timeout_s: float = 5.0) -> Health:
        """Configured and keyed; nothing is sent, so the check spends nothing."""
        self.settings.api_key()
        return Health(True, f"anthropic model {self.model} at {self.endpoint} (key present; not called)")

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        try:
            headers = self._headers(request)  # first: it names a bad anthropic_beta before anything trips on it
            payload = self._payload(request, stream=stream)
        except (TypeError, ValueError, AttributeError) as exc:  # a value of the client's it cannot write
            raise failed_writing(exc, self.where()) from exc
        async with self._http.post(self._messages_url(), payload, headers,
                                   deadline.remaining(), self.settings.timeout_s) as reply:
            if not stream or reply.whole:
                for delta in self._answer(await reply.body(), reply.simulated):
                    yield delta
                return
            async for delta in self._stream_events(reply):
                yield delta

    def _answer(self, body: bytes, simulated: bool) -> list[Delta]:
        try:
            message = orjson.loads(body)
            deltas = message_deltas(message)
            sealed, tool_ids = message_thinking(message)
        except (ValueError, AttributeError, TypeError) as exc:
            raise MalformedResponse(f"not an Anthropic message: {body[:200]!r}", **self.where()) from exc
        self._signed.remember(tool_ids, sealed)
        for delta in deltas:
            delta.simulated = simulated
        return deltas

    async def _stream_events(self, reply: Reply) -> AsyncIterator[Delta]:
        reader = StreamReader()
        finished = False
        async for batch in reply.events(_is_stop):
            fold = Fold(reply.simulated)  # a read of many events goes up as few Deltas (assembly.py)
            for data in batch:
                delta = reader.read(self._parse_event(data))
                if delta is not None:
                    fold.delta(delta)
            for delta in fold.done():
                finished = finished or delta.finish_reason is not None
                yield delta
        check_finished(reply, finished, "no stop_reason, no message_stop", self.where())
        self._signed.remember(reader.tool_ids, reader.sealed)

    def _parse_event(self, data: bytes) -> dict[str, Any]:
        event = json_event(data, self.where)
        if event.get("type") == "error":  # a failure after the 200: overloaded, mostly
            error = event.get("error") or {}
            raise stream_error(error.get("type"), str(error.get("message") or ""), self.where())
        return event

    async def aclose(self) -> None:
        await self._http.aclose()


def _thinking(payload: dict[str, Any], limit: int | None) -> None:
    """Thinking and `max_tokens`, once every field is settled: without a maximum (`limit`), the
    answer's default room with the thinking budget on top. A tool turn whose signed thinking is
    lost (backends/anthropic_thinking.py) is sent with thinking off, which Anthropic takes, rather
    than refused, whether the client or the config turned thinking on. Only thinking that is
    `enabled`: under `adaptive` the model may have chosen not to think before its tool calls, and
    its turn is as it should be."""
    thinking = payload.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    payload["max_tokens"] = limit or _DEFAULT_MAX_TOKENS + int(budget or 0)
    if isinstance(thinking, dict) and thinking.get("type") == "enabled" and unsigned_tool_turn(payload["messages"]):
        without_thinking(payload)


def _unsampled_while_thinking(payload: dict[str, Any]) -> dict[str, Any]:
    """Anthropic refuses sampling changes while the model thinks: they are left out then."""
    thinking = payload.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        for key in ("temperature", "top_p", "top_k"):
            payload.pop(key, None)
    return payload


def _betas(request: Request | None, where: Where) -> list[str]:
    if request is None:
        return []
    given = request.extra.get("anthropic_beta") or ()
    betas = [b for b in client_header("anthropic-beta", given, param="anthropic_beta", where=where) if b]
    if (priced := beta_refusal(betas, COUNTED_BETAS["anthropic"])) is not None:
        raise refused(priced, param="anthropic_beta", where=where)
    if request.extra.get("response_format") and not request.extra.get("output_config"):
        betas.append(_STRUCTURED_OUTPUTS)  # response_format is sent as output_config.format
    return betas


def _is_stop(data: bytes) -> bool:
    # Parsed only when it could be the one: every other event is parsed once, by _parse_event.
    if b'"message_stop"' not in data:
        return False
    try:
        return orjson.loads(data).get("type") == "message_stop"
    except (ValueError, AttributeError):
        return False  # _parse_event says what is wrong with it
