"""Any OpenAI-compatible chat-completions server, over httpx directly.

vLLM, mlx-vlm, NVIDIA NIM and llama.cpp serve DiffusionGemma this way, and Mercury's API is one
too, so this is the fast path: pooled AsyncClients per event loop (backends/http_clients.py), no
SDK in between. This module is only the wire call; the base class assembles the answer and the
call path retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, ClassVar, cast

import httpx

from backends.assembly import Delta
from backends.base import Backend, BackendSettings, Health
from backends.capabilities import Capabilities
from backends.deadline import Deadline
from backends.errors import BackendError, MalformedResponse
from backends.http_clients import ClientSet
from backends.http_errors import error_for_status, translate_transport_error
from backends.params import ChatParams
from backends.per_loop import PerLoop
from backends.served import not_served_hint, served_models
from backends.thinking import reasoning_delta, reasoning_of  # thinking hook
from backends.types import Request, Usage

__all__ = ["OpenAIBackend"]

_DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


class OpenAIBackend(Backend):
    kind = "openai"
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True, seed=True, vision=True, drafts=True)
    params_model = ChatParams

    def __init__(self, settings: BackendSettings, *, transport: httpx.AsyncBaseTransport | None = None):
        super().__init__(settings)
        self._transport = transport  # tests hand in httpx.MockTransport
        # For messages: as configured, so a ${NAME} in it never shows its value.
        self._shown = (settings.base_url or _DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        # An AsyncClient is bound to the loop it first ran on; the sync wrappers start new loops.
        self._clients = PerLoop(self._new_clients)
        self._parsed: tuple[str, httpx.URL] | None = None  # the last URL called, parsed

    @property
    def endpoint(self) -> str:
        return self._shown

    def _new_clients(self) -> ClientSet:
        return ClientSet(self._transport)

    def _headers(self) -> dict[str, str]:
        headers = self.settings.resolve(self.settings.headers)
        key = self.settings.api_key()
        return {**headers, "Authorization": f"Bearer {key}"} if key else headers

    def _payload(self, request: Request, *, stream: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {**self.settings.resolve(self.settings.passthrough), **self.settings.params,
                                   **request.extra}
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

    def _translate(self, exc: Exception) -> BackendError:
        if isinstance(exc, httpx.HTTPError):
            return translate_transport_error(exc, url=self._shown, **self.where())
        return super()._translate(exc)

    async def check(self, timeout_s: float = 5.0) -> Health:
        """GET /models: reachable, the key (if any) accepted, and our model among those served."""
        base = self._shown.removesuffix("/chat/completions")
        try:
            async with self._clients.get().lease() as client:
                response = await client.get(self.settings.url("/models", _DEFAULT_BASE_URL),
                                            headers=self._headers(), timeout=timeout_s)
        except httpx.HTTPError as exc:
            return Health(False, f"cannot reach {base} ({type(exc).__name__}); is the server running?")
        if response.status_code in (401, 403):
            return Health(False, f"{base} refused the key (HTTP {response.status_code})")
        if response.status_code >= 400:
            return Health(False, f"{base}/models answered HTTP {response.status_code}")
        simulated = " [SIMULATED]" if response.headers.get("x-simulated") == "true" else ""
        try:
            served = served_models(response.json())
        except ValueError:
            served = []
        if served and self.model not in served:
            problem = f"{base} does not serve {self.model!r}; {not_served_hint(self.model, served)}"
            if response.headers.get("x-sim-any-model") == "true":
                # The lenient simulator answers every name; a real server (vLLM) would answer 404.
                return Health(True, f"reachable at {base}{simulated}, which answers any name, but {problem}")
            return Health(False, problem)
        return Health(True, f"reachable at {base}{simulated}")

    # -- the wire call ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _exchange(self, url: str, payload: dict[str, Any], deadline: Deadline) -> AsyncIterator[httpx.Response]:
        """POST with the time left, as a stream, on the least busy pooled client; an error status
        is raised as ours. The response is closed on the way out, which frees its connection."""
        remaining = deadline.remaining()
        limit = self.settings.timeout_s if remaining is None else max(0.001, remaining)
        async with self._clients.get().lease() as client:
            sent = client.build_request("POST", self._url(url), json=payload, headers=self._headers(),
                                        timeout=httpx.Timeout(limit, connect=min(limit, 10.0)))
            response = await client.send(sent, stream=True)
            try:
                if response.status_code >= 400:
                    body = (await response.aread()).decode("utf-8", "replace")
                    raise error_for_status(response.status_code, response.headers, body, **self.where())
                yield response
            finally:
                await response.aclose()

    def _url(self, url: str) -> httpx.URL:
        """`url` parsed, once while it stays the same: httpx's parser took 2% of `route serve`'s
        CPU per request (py-spy, issue 13). The string is still built per call, from the
        environment as configured."""
        if self._parsed is None or self._parsed[0] != url:
            self._parsed = (url, httpx.URL(url))
        return self._parsed[1]

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        payload = self._payload(request, stream=stream)
        async with self._exchange(self.settings.url("/chat/completions", _DEFAULT_BASE_URL), payload,
                                  deadline) as response:
            simulated = response.headers.get("x-simulated") == "true"
            if not stream:
                yield self._message(await response.aread(), simulated)
                return
            # Mercury's `diffusing: true` (in params or extra) streams the whole draft in every event.
            diffusing = bool(payload.get("diffusing"))
            async for delta in self._events(response, simulated, diffusing):
                yield delta

    def _message(self, body: bytes, simulated: bool) -> Delta:
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            message = choice.get("message") or {}
            calls = [{**call, "index": i} for i, call in enumerate(message.get("tool_calls") or ())]
            return Delta(text=message.get("content") or "", tool_calls=calls, usage=_usage(data.get("usage")),
                         finish_reason=choice.get("finish_reason"), simulated=simulated,
                         reasoning=reasoning_of(message))  # thinking hook: backends/thinking.py
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedResponse(f"not an OpenAI chat completion: {body[:200]!r}", **self.where()) from exc

    async def _events(self, response: httpx.Response, simulated: bool, diffusing: bool) -> AsyncIterator[Delta]:
        lines = cast(AsyncGenerator[str, None], response.aiter_lines())
        try:
            async for line in lines:
                if not line.startswith("data:"):  # SSE comments, event names, keep-alives
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                yield self._event(data, simulated, diffusing)
            await _drain(lines)
        finally:
            await lines.aclose()  # close the generator rather than leave it to GC

    def _event(self, data: str, simulated: bool, diffusing: bool) -> Delta:
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise MalformedResponse(f"unparseable stream event: {data[:200]!r}", **self.where()) from exc
        text, finish = "", None
        calls: list[dict[str, Any]] = []
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason") or finish
            calls.extend(delta.get("tool_calls") or ())
            text += delta.get("content") or ""
        usage = _usage(event.get("usage"))
        if diffusing:  # each event replaces the draft: shown by `route --watch`, never appended
            return Delta(draft=text, tool_calls=calls, usage=usage, finish_reason=finish, simulated=simulated)
        return Delta(text=text, tool_calls=calls, usage=usage, finish_reason=finish, simulated=simulated,
                     reasoning=reasoning_delta(event))  # thinking hook: backends/thinking.py

    async def aclose(self) -> None:
        sets, self._clients = self._clients.by_loop, PerLoop(self._new_clients)
        for loop, clients in sets.items():
            if not loop.is_closed():
                try:
                    await clients.aclose()
                except RuntimeError:
                    pass  # a client from another, still-open loop: dropped with that loop


async def _drain(lines: AsyncIterator[str], limit_s: float = 0.05) -> None:
    """Read past [DONE] to the end of the body: only a fully read response lets httpx put the
    connection back in its pool; otherwise every stream would pay for a new connection."""
    try:
        async with asyncio.timeout(limit_s):
            async for _ in lines:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass  # a server that keeps the body open after [DONE]: give up reuse, keep the answer


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(input_tokens=int(raw.get("prompt_tokens") or 0), output_tokens=int(raw.get("completion_tokens") or 0))
