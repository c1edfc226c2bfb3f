"""Any OpenAI-compatible chat-completions server, over httpx directly.

vLLM, mlx-vlm, NVIDIA NIM and llama.cpp serve DiffusionGemma this way, and Mercury's API is one
too, so this is the fast path: one pooled AsyncClient per event loop, no SDK in between.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from backends.base import Backend, BackendSettings
from backends.errors import BackendTimeout, MalformedResponse
from backends.http_errors import error_for_status, translate_transport_error
from backends.retry import Deadline, call_with_retries
from backends.types import (
    Chunk,
    Completion,
    DiffusionStats,
    DraftChunk,
    FinalChunk,
    Request,
    TextChunk,
    Timings,
    Usage,
)

__all__ = ["OpenAIBackend"]

_DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


class OpenAIBackend(Backend):
    kind = "openai"
    supports_tools = True

    def __init__(self, settings: BackendSettings, *, transport: httpx.AsyncBaseTransport | None = None):
        super().__init__(settings)
        self._transport = transport  # tests hand in httpx.MockTransport
        self._url = (settings.base_url or _DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        # An AsyncClient is bound to the loop it first ran on; the sync wrappers start new loops.
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}

    # -- plumbing -------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for stale in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[stale]
            limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
            client = httpx.AsyncClient(transport=self._transport, limits=limits, timeout=None)
            self._clients[loop] = client
        return client

    def _headers(self) -> dict[str, str]:
        key = self.settings.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _payload(self, request: Request, *, stream: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {**self.settings.params, **request.extra}
        payload["model"] = self.model
        payload["messages"] = request.messages
        if request.max_tokens is not None:
            payload["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.stop:
            payload["stop"] = request.stop
        if stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        return payload

    def _timeout(self, deadline: Deadline) -> httpx.Timeout:
        remaining = deadline.remaining()
        limit = self.settings.timeout_s if remaining is None else max(0.001, remaining)
        return httpx.Timeout(limit, connect=min(limit, 10.0))

    def _deadline(self, request: Request) -> Deadline:
        timeouts = [t for t in (request.timeout_s, self.settings.timeout_s) if t is not None]
        return Deadline(min(timeouts) if timeouts else None)

    def _where(self) -> dict[str, str]:
        return {"backend": self.name, "model": self.model}

    async def _retrying(self, attempt, deadline: Deadline):
        return await call_with_retries(
            attempt,
            max_retries=self.settings.max_retries,
            deadline=deadline,
            backoff_initial_s=self.settings.backoff_initial_s,
        )

    def _finish(self, text: str, usage: Usage | None, finish_reason: str | None, ttft: float | None,
                started: float, simulated: bool, tool_calls: list | None) -> Completion:
        total = time.perf_counter() - started
        metadata: dict[str, Any] = {"simulated": True} if simulated else {}
        if usage is None:
            # Servers that omit usage still get a cost estimate; say it is one.
            usage = Usage(output_tokens=max(1, len(text) // 4) if text else 0)
            metadata["usage_estimated"] = True
        diffusion = None
        if self.settings.decoding == "diffusion":
            canvases = DiffusionStats.canvases_for(usage.output_tokens, self.settings.canvas_length)
            diffusion = DiffusionStats(canvases=canvases, canvas_length=self.settings.canvas_length)
        return Completion(
            text=text,
            backend=self.name,
            model=self.model,
            finish_reason=finish_reason,
            usage=usage,
            timings=Timings.measure(ttft, total, usage.output_tokens, diffusion=diffusion is not None),
            cost_usd=self.settings.price.cost(usage),
            diffusion=diffusion,
            tool_calls=tool_calls or None,
            metadata=metadata,
        )

    # -- the interface --------------------------------------------------------------------

    async def complete(self, request: Request) -> Completion:
        deadline = self._deadline(request)
        payload = self._payload(request, stream=False)

        async def attempt() -> Completion:
            started = time.perf_counter()
            try:
                async with asyncio.timeout(deadline.remaining()):
                    response = await self._client().post(
                        self._url, json=payload, headers=self._headers(), timeout=self._timeout(deadline)
                    )
            except TimeoutError as exc:
                raise BackendTimeout(f"no answer from {self._url} within the deadline", **self._where()) from exc
            except httpx.HTTPError as exc:
                raise translate_transport_error(exc, url=self._url, **self._where()) from exc
            if response.status_code >= 400:
                raise error_for_status(response.status_code, response.headers, response.text, **self._where())
            return self._parse_completion(response, started)

        return await self._retrying(attempt, deadline)

    def _parse_completion(self, response: httpx.Response, started: float) -> Completion:
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice.get("message") or {}
            text = message.get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedResponse(
                f"not an OpenAI chat completion: {response.text[:200]!r}", **self._where()
            ) from exc
        usage = _usage(data.get("usage"))
        simulated = response.headers.get("x-simulated") == "true"
        return self._finish(text, usage, choice.get("finish_reason"), None, started, simulated,
                            message.get("tool_calls"))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        deadline = self._deadline(request)
        payload = self._payload(request, stream=True)
        client = self._client()
        started = time.perf_counter()

        async def open_stream() -> httpx.Response:
            try:
                async with asyncio.timeout(deadline.remaining()):
                    req = client.build_request("POST", self._url, json=payload, headers=self._headers(),
                                               timeout=self._timeout(deadline))
                    response = await client.send(req, stream=True)
            except TimeoutError as exc:
                raise BackendTimeout(f"no answer from {self._url} within the deadline", **self._where()) from exc
            except httpx.HTTPError as exc:
                raise translate_transport_error(exc, url=self._url, **self._where()) from exc
            if response.status_code >= 400:
                body = (await response.aread()).decode("utf-8", "replace")
                await response.aclose()
                raise error_for_status(response.status_code, response.headers, body, **self._where())
            return response

        response = await self._retrying(open_stream, deadline)
        try:
            # Mercury's `diffusing: true` (in params or extra) streams the whole draft in every event.
            diffusing = bool(payload.get("diffusing"))
            async for chunk in self._read_events(response, deadline, started, diffusing=diffusing):
                yield chunk
        finally:
            await response.aclose()

    async def _read_events(self, response: httpx.Response, deadline: Deadline, started: float, *,
                           diffusing: bool = False) -> AsyncIterator[Chunk]:
        state = _StreamState()
        lines = response.aiter_lines()
        try:
            async for chunk in self._parse_lines(lines, state, deadline, started, diffusing):
                yield chunk
            await _drain(lines)
        finally:
            await lines.aclose()  # close the generator rather than leave it to GC
        if diffusing and state.parts:
            yield TextChunk(state.parts[-1])  # the last draft is the answer: the only committed text
        simulated = response.headers.get("x-simulated") == "true"
        calls = [state.tool_calls[i] for i in sorted(state.tool_calls)]
        yield FinalChunk(self._finish("".join(state.parts), state.usage, state.finish_reason, state.ttft, started,
                                      simulated, calls))

    async def _parse_lines(self, lines, state: _StreamState, deadline: Deadline, started: float,
                           diffusing: bool = False) -> AsyncIterator[Chunk]:
        step = 0
        while (data := await self._next_data(lines, deadline)) is not None:
            try:
                event = json.loads(data)
            except ValueError as exc:
                raise MalformedResponse(f"unparseable stream event: {data[:200]!r}", **self._where()) from exc
            content = state.apply(event)
            if content:
                if state.ttft is None:
                    state.ttft = time.perf_counter() - started
                if diffusing:  # each event replaces the draft: shown by `route --watch`, never appended
                    step += 1
                    state.parts[:] = [content]
                    yield DraftChunk(content, step=step)
                else:
                    yield TextChunk(content)

    async def _next_data(self, lines, deadline: Deadline) -> str | None:
        """The payload of the next SSE `data:` line, or None at [DONE] or the end of the body."""
        while True:
            try:
                async with asyncio.timeout(deadline.remaining()):
                    line = await anext(lines)
            except StopAsyncIteration:
                return None
            except TimeoutError as exc:
                raise BackendTimeout(f"stream from {self._url} stalled past the deadline", **self._where()) from exc
            except httpx.HTTPError as exc:
                raise translate_transport_error(exc, url=self._url, **self._where()) from exc
            if line.startswith("data:"):  # other lines are SSE comments, event names, keep-alives
                data = line[5:].strip()
                return None if data == "[DONE]" else data

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for loop, client in clients.items():
            if not loop.is_closed():
                try:
                    await client.aclose()
                except RuntimeError:
                    pass  # a client from another, still-open loop: dropped with that loop


async def _drain(lines, limit_s: float = 0.05) -> None:
    """Read past [DONE] to the end of the body: only a fully read response lets httpx put the
    connection back in its pool; otherwise every stream would pay for a new connection."""
    try:
        async with asyncio.timeout(limit_s):
            async for _ in lines:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass  # a server that keeps the body open after [DONE]: give up reuse, keep the answer


@dataclass
class _StreamState:
    """What a stream has told us so far."""

    parts: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    ttft: float | None = None
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def apply(self, event: dict[str, Any]) -> str:
        """Fold one chunk event in; return its new text ("" if none)."""
        if event.get("usage"):
            self.usage = _usage(event["usage"])
        text = ""
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            for call in delta.get("tool_calls") or ():
                _merge_tool_call(self.tool_calls, call)
            text += delta.get("content") or ""
        if text:
            self.parts.append(text)
        return text


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(input_tokens=int(raw.get("prompt_tokens") or 0), output_tokens=int(raw.get("completion_tokens") or 0))


def _merge_tool_call(calls: dict[int, dict[str, Any]], delta: dict[str, Any]) -> None:
    """Stream deltas carry a tool call in pieces keyed by index; arguments arrive as string parts."""
    slot = calls.setdefault(delta.get("index", 0), {"type": "function", "function": {"name": "", "arguments": ""}})
    if delta.get("id"):
        slot["id"] = delta["id"]
    function = delta.get("function") or {}
    if function.get("name"):
        slot["function"]["name"] += function["name"]
    if function.get("arguments"):
        slot["function"]["arguments"] += function["arguments"]
