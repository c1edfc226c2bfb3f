"""Anthropic's Messages API over HTTP directly: Claude without litellm's import (seconds and
hundreds of MB). The chat-format request is written as a Messages request and the answer read
back as Deltas by backends/anthropic_format.py; this module is only the wire call.

It shares the openai kind's pooled per-loop aiohttp session, error translation and closing, so it
subclasses that backend and replaces what differs: the URL, the headers, the body, the parsing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, ClassVar

from backends.anthropic_format import StreamReader, message_delta, request_parts
from backends.assembly import Delta
from backends.base import BackendSettings, Health
from backends.capabilities import Capabilities
from backends.deadline import Deadline
from backends.errors import BackendUnavailable, BadRequest, MalformedResponse, RateLimited
from backends.http_session import lines
from backends.openai_http import OpenAIBackend
from backends.params import AnthropicParams
from backends.types import Request

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AnthropicBackend"]

_DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
_VERSION = "2023-06-01"
_DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; a request or `params:` usually sets it
# Chat parameters the Messages API also takes; others (seed, response_format...) it has no word for.
_SHARED = ("top_p", "top_k", "metadata")


class AnthropicBackend(OpenAIBackend):
    kind = "anthropic"
    # No seed: N samples of one Claude model differ by temperature alone.
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True, vision=True)
    # The openai kind's attribute is typed narrowly (ChatParams); this kind's schema differs.
    params_model = AnthropicParams  # type: ignore[assignment]

    def __init__(self, settings: BackendSettings):
        super().__init__(settings)
        self._shown = (settings.base_url or _DEFAULT_BASE_URL).rstrip("/") + "/messages"

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": _VERSION, **self.settings.resolve(self.settings.headers)}
        key = self.settings.api_key()
        return {**headers, "x-api-key": key} if key else headers

    def _payload(self, request: Request, *, stream: bool) -> dict[str, Any]:
        params = dict(self.settings.params)
        payload: dict[str, Any] = {**self.settings.resolve(self.settings.passthrough), **params,
                                   **{k: request.extra[k] for k in _SHARED if k in request.extra}}
        payload.update(request_parts(request.messages, request.extra))
        payload["model"] = self.model
        payload["max_tokens"] = request.max_tokens or params.get("max_tokens") or _DEFAULT_MAX_TOKENS
        if request.temperature is not None:
            payload["temperature"] = min(1.0, request.temperature)  # Anthropic's range is 0..1
        if request.stop:
            payload["stop_sequences"] = request.stop
        if stream:
            payload["stream"] = True
        return payload

    async def check(self, timeout_s: float = 5.0) -> Health:
        """Configured and keyed; nothing is sent, so the check spends nothing."""
        self.settings.api_key()
        return Health(True, f"anthropic model {self.model} at {self._shown} (key present; not called)")

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        payload = self._payload(request, stream=stream)
        async with self._exchange(self.settings.url("/messages", _DEFAULT_BASE_URL), payload, deadline) as response:
            simulated = response.headers.get("x-simulated") == "true"
            if not stream:
                yield self._answer(await response.read(), simulated)
                return
            async for delta in self._stream_events(response, simulated):
                yield delta

    def _answer(self, body: bytes, simulated: bool) -> Delta:
        try:
            text, calls, usage, reason = message_delta(json.loads(body))
        except (ValueError, AttributeError, TypeError) as exc:
            raise MalformedResponse(f"not an Anthropic message: {body[:200]!r}", **self.where()) from exc
        return Delta(text=text, tool_calls=calls, usage=usage, finish_reason=reason, simulated=simulated)

    async def _stream_events(self, response: aiohttp.ClientResponse, simulated: bool) -> AsyncIterator[Delta]:
        reader = StreamReader()
        async with contextlib.aclosing(lines(response.content.iter_any())) as body:
            async for line in body:
                if not line.startswith("data:"):  # event names (the data repeats them), pings' blank lines
                    continue
                event = self._parse_event(line[5:].strip())
                if event.get("type") == "message_stop":
                    break
                text, calls, usage, reason = reader.read(event)
                if text or calls or usage or reason:
                    yield Delta(text=text, tool_calls=calls, usage=usage, finish_reason=reason, simulated=simulated)

    def _parse_event(self, data: str) -> dict[str, Any]:
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise MalformedResponse(f"unparseable stream event: {data[:200]!r}", **self.where()) from exc
        if not isinstance(event, dict):
            raise MalformedResponse(f"unexpected stream event: {data[:200]!r}", **self.where())
        if event.get("type") == "error":  # a failure after the 200: overloaded, mostly
            error = event.get("error") or {}
            kind = {"rate_limit_error": RateLimited, "invalid_request_error": BadRequest}.get(
                str(error.get("type")), BackendUnavailable)
            raise kind(f"{error.get('type')}: {error.get('message')}", **self.where())
        return event
