"""Every other hosted provider (Anthropic, Gemini, Bedrock, ...) through litellm.

litellm takes seconds and ~200 MB to import, so it is imported on the first call of such a
backend, never at CLI start; its offline cost map is forced so the import does no network I/O.
Retries are ours (backends/retry.py), so litellm's own are switched off.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from backends.base import Backend
from backends.errors import BackendError, BackendTimeout, BackendUnavailable, MalformedResponse
from backends.http_errors import error_for_status, parse_retry_after
from backends.retry import Deadline, call_with_retries
from backends.types import Chunk, Completion, FinalChunk, Request, TextChunk, Timings, Usage

__all__ = ["LiteLLMBackend", "load_litellm"]


def load_litellm():
    """Import litellm quietly and offline (no cost-map fetch, no telemetry)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


class LiteLLMBackend(Backend):
    kind = "litellm"
    supports_tools = True

    def _kwargs(self, request: Request, deadline: Deadline, *, stream: bool) -> dict[str, Any]:
        kwargs: dict[str, Any] = {**self.settings.params, **request.extra}
        kwargs.update(model=self.model, messages=request.messages, num_retries=0, max_retries=0)
        remaining = deadline.remaining()
        kwargs["timeout"] = self.settings.timeout_s if remaining is None else max(0.001, remaining)
        if self.settings.base_url:
            kwargs["api_base"] = self.settings.base_url
        key = self.settings.api_key()
        if key:
            kwargs["api_key"] = key
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop"] = request.stop
        if stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        return kwargs

    def _deadline(self, request: Request) -> Deadline:
        timeouts = [t for t in (request.timeout_s, self.settings.timeout_s) if t is not None]
        return Deadline(min(timeouts) if timeouts else None)

    def _translate(self, exc: Exception) -> BackendError:
        where = {"backend": self.name, "model": self.model}
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, TimeoutError) or type(exc).__name__ == "Timeout":
            return BackendTimeout(f"no answer within the deadline ({type(exc).__name__})", **where)
        status = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or getattr(exc, "headers", None) or {}
        message = str(getattr(exc, "message", exc))
        if isinstance(status, int) and status >= 400:
            import httpx

            error = error_for_status(status, httpx.Headers(dict(headers)), message, **where)
            if status == 429 and getattr(error, "retry_after", None) is None:
                error.retry_after = parse_retry_after(dict(headers).get("retry-after"))
            return error
        return BackendUnavailable(f"{type(exc).__name__}: {message[:300]}", **where)

    def _cost(self, usage: Usage) -> float:
        price = self.settings.price
        if price.input_per_mtok or price.output_per_mtok:
            return price.cost(usage)
        # No configured price: litellm's offline map knows most hosted models.
        entry = load_litellm().model_cost.get(self.model) or load_litellm().model_cost.get(self.model.split("/", 1)[-1]) or {}
        return usage.input_tokens * float(entry.get("input_cost_per_token") or 0) + usage.output_tokens * float(
            entry.get("output_cost_per_token") or 0
        )

    def _completion(self, text: str, usage: Usage | None, finish: str | None, ttft: float | None,
                    started: float, tool_calls: list | None, simulated: bool) -> Completion:
        metadata: dict[str, Any] = {"simulated": True} if simulated else {}
        if usage is None:
            usage = Usage(output_tokens=max(1, len(text) // 4) if text else 0)
            metadata["usage_estimated"] = True
        return Completion(
            text=text,
            backend=self.name,
            model=self.model,
            finish_reason=finish,
            usage=usage,
            timings=Timings.measure(ttft, time.perf_counter() - started, usage.output_tokens),
            cost_usd=self._cost(usage),
            tool_calls=tool_calls or None,
            metadata=metadata,
        )

    async def complete(self, request: Request) -> Completion:
        self.settings.api_key()  # a missing key fails here, before paying for the import
        litellm = load_litellm()
        deadline = self._deadline(request)

        async def attempt() -> Completion:
            started = time.perf_counter()
            try:
                async with asyncio.timeout(deadline.remaining()):
                    response = await litellm.acompletion(**self._kwargs(request, deadline, stream=False))
            except Exception as exc:  # litellm raises many types; all are translated here
                raise self._translate(exc) from exc
            try:
                choice = response.choices[0]
                text = choice.message.content or ""
                calls = [c.model_dump() for c in (choice.message.tool_calls or [])]
            except (AttributeError, IndexError, TypeError) as exc:
                raise MalformedResponse(f"unexpected response shape: {response!r:.200}", backend=self.name, model=self.model) from exc
            return self._completion(text, _usage(getattr(response, "usage", None)), choice.finish_reason, None,
                                    started, calls, _is_simulated(response))

        return await call_with_retries(attempt, max_retries=self.settings.max_retries, deadline=deadline,
                                       backoff_initial_s=self.settings.backoff_initial_s)

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        self.settings.api_key()
        litellm = load_litellm()
        deadline = self._deadline(request)
        started = time.perf_counter()

        async def open_stream():
            try:
                async with asyncio.timeout(deadline.remaining()):
                    return await litellm.acompletion(**self._kwargs(request, deadline, stream=True))
            except Exception as exc:
                raise self._translate(exc) from exc

        response = await call_with_retries(open_stream, max_retries=self.settings.max_retries, deadline=deadline,
                                           backoff_initial_s=self.settings.backoff_initial_s)
        state = _StreamState()
        try:
            while (event := await self._next_event(response, deadline)) is not None:
                content = state.apply(event)
                if content:
                    state.ttft = state.ttft if state.ttft is not None else time.perf_counter() - started
                    yield TextChunk(content)
        finally:
            await _close_quietly(response)
        yield FinalChunk(self._completion("".join(state.parts), state.usage, state.finish, state.ttft, started, None,
                                          state.simulated))

    async def _next_event(self, response: Any, deadline: Deadline) -> Any | None:
        try:
            async with asyncio.timeout(deadline.remaining()):
                return await anext(response)
        except StopAsyncIteration:
            return None
        except Exception as exc:
            raise self._translate(exc) from exc


@dataclass
class _StreamState:
    parts: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish: str | None = None
    ttft: float | None = None
    simulated: bool = False

    def apply(self, event: Any) -> str:
        """Fold one litellm stream chunk in; return its new text."""
        self.usage = _usage(getattr(event, "usage", None)) or self.usage
        self.simulated = self.simulated or _is_simulated(event)
        text = ""
        for choice in getattr(event, "choices", None) or ():
            self.finish = getattr(choice, "finish_reason", None) or self.finish
            text += getattr(getattr(choice, "delta", None), "content", None) or ""
        if text:
            self.parts.append(text)
        return text


async def _close_quietly(response: Any) -> None:
    close = getattr(response, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # closing a half-read stream may raise; the answer is already decided
            pass


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    prompt = getattr(raw, "prompt_tokens", None)
    completion = getattr(raw, "completion_tokens", None)
    if prompt is None and completion is None:
        return None
    return Usage(input_tokens=int(prompt or 0), output_tokens=int(completion or 0))


def _is_simulated(response: Any) -> bool:
    return getattr(response, "system_fingerprint", None) == "simulated"
