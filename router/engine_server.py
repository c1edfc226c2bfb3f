"""An OpenAI-compatible HTTP server over one in-process backend (the local DiffusionGemma engine).

    route engine serve --model /models/diffusiongemma-26B-A4B-it      # 127.0.0.1:8000

Other tools, and other router instances (`kind: openai, base_url: http://127.0.0.1:8000/v1`),
then use the engine like vLLM. Endpoints: POST /v1/chat/completions (plain and `stream: true`),
GET /v1/models, GET /healthz. The stream carries committed text only -- OpenAI clients would
append drafts as text -- unless the client asks for Mercury's `"diffusing": true`: then every
event holds the whole answer so far, drafts included, and the last one the answer itself, so
`route --watch` on another machine shows the canvas denoising.
DiffusionGemma settings (max_denoising_steps, entropy_bound, t_min, t_max, stability_threshold,
confidence_threshold, seed) may be sent as extra body fields; other unknown fields are ignored,
as vLLM does.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from starlette.requests import Request as HTTPRequest  # at module level: FastAPI resolves the annotation here

from backends.base import Backend
from backends.deadline import Deadline
from backends.diffusion.engine import GENERATION_KEYS
from backends.errors import RouteError, UsageError
from backends.threaded_server import ThreadedServer
from backends.types import Completion, DraftChunk, FinalChunk, Request, TextChunk, ThinkingChunk
from policies.breaker import BreakerBoard
from router.calls import CallOptions, CallPath
from router.server.wire import ApiError, ChunkWriter, error_for_failure

__all__ = ["EngineServer", "create_app"]

_PASSED = (*GENERATION_KEYS, "seed", "thinking", "tools", "tool_choice", "parallel_tool_calls")


def _request(body: dict[str, Any]) -> Request:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UsageError("`messages` must be a non-empty list of {role, content} objects")
    stop = body.get("stop")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return Request(
        messages=messages,
        max_tokens=max_tokens,
        temperature=body.get("temperature"),
        stop=[stop] if isinstance(stop, str) else stop,
        extra={key: body[key] for key in _PASSED if key in body},
    )


def _usage(completion: Completion) -> dict[str, Any]:
    u = completion.usage
    usage: dict[str, Any] = {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                             "total_tokens": u.total_tokens}
    if u.thinking_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": u.thinking_tokens}
    return usage


def _message(completion: Completion) -> dict[str, Any]:
    """The assistant message; thinking goes apart in `reasoning_content`, as vLLM's reasoning parsers send it."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.thinking:
        message["reasoning_content"] = completion.thinking
    if completion.tool_calls:
        message["tool_calls"] = completion.tool_calls
    return message


def _diffusion(completion: Completion) -> dict[str, Any] | None:
    d = completion.diffusion
    if d is None:
        return None
    return {"canvases": d.canvases, "denoising_steps": d.denoising_steps, "canvas_length": d.canvas_length,
            "tokens_per_forward": completion.metadata.get("tokens_per_forward", d.tokens_per_forward)}


def _error(error: ApiError) -> Any:
    """The one error shape and status rule of `route serve` (router/server/wire.py)."""
    from fastapi.responses import Response

    return Response(error.body(), status_code=error.status, media_type="application/json", headers=error.headers)


def _failure(exc: RouteError) -> ApiError:
    if isinstance(exc, UsageError):
        return ApiError(400, str(exc), code="invalid_request")
    return error_for_failure(exc)


def _call_path(backend: Backend) -> CallPath:
    """The engine's calls go through the same call path as the router's (deadline, breaker,
    redaction, observers); a local engine is not retried: a failure there would repeat."""
    return CallPath({backend.name: backend}.__getitem__, breakers=BreakerBoard(time.monotonic))


def _options(request: Request) -> CallOptions:
    return CallOptions(deadline=Deadline(request.timeout_s), retries=0)


def create_app(backend: Backend, served_name: str | None = None):
    """A FastAPI app serving `backend` under the model id `served_name` (default: its model)."""
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    name = served_name or backend.model
    calls = _call_path(backend)
    app = FastAPI(title=f"route engine: {name}", docs_url=None, redoc_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        health: dict[str, Any] = {"status": "ok", "model": name, "backend": backend.kind}
        if (stats := getattr(backend, "stats", None)) is not None:
            health["engine"] = stats  # requests done, cancelled, failed; denoising steps run
        return health

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "local"}]}

    @app.post("/v1/chat/completions")
    async def chat(http_request: HTTPRequest):
        try:
            body = await http_request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            request = _request(body)
        except (ValueError, UsageError) as exc:
            return _error(ApiError(400, str(exc), code="invalid_request"))
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(_sse(calls, backend.name, request, name, include_usage,
                                          diffusing=body.get("diffusing") is True),
                                     media_type="text/event-stream")
        try:
            completion = await calls.complete(backend.name, request, _options(request))
        except RouteError as exc:
            return _error(_failure(exc))
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [{"index": 0, "message": _message(completion),
                         "finish_reason": completion.finish_reason or "stop"}],
            "usage": _usage(completion),
        }
        if (diffusion := _diffusion(completion)) is not None:
            payload["diffusion"] = diffusion  # an extension field; OpenAI clients ignore it
        return payload

    return app


async def _sse(calls: CallPath, backend: str, request: Request, name: str, include_usage: bool, *,
               diffusing: bool = False):
    """OpenAI chat.completion.chunk events for committed text (with `diffusing`, the whole answer
    so far in every event, drafts included); errors become one error event."""
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": name,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"

    yield event({"role": "assistant", "content": ""})
    stream = calls.stream(backend, request, _options(request))
    committed = ""
    try:
        async for chunk in stream:
            if diffusing and isinstance(chunk, (TextChunk, DraftChunk, FinalChunk)):
                if isinstance(chunk, TextChunk):
                    committed += chunk.text
                whole = (chunk.completion.text if isinstance(chunk, FinalChunk)
                         else committed + chunk.text if isinstance(chunk, DraftChunk) else committed)
                yield event({"content": whole})
            if isinstance(chunk, TextChunk):
                if not diffusing:
                    yield event({"content": chunk.text})
            elif isinstance(chunk, ThinkingChunk):
                yield event({"reasoning_content": chunk.text})
            elif isinstance(chunk, FinalChunk):
                c = chunk.completion
                if c.tool_calls:  # parsed from the model's protocol once the answer is complete
                    yield event({"tool_calls": [{"index": i, **call} for i, call in enumerate(c.tool_calls)]})
                yield event({}, c.finish_reason or "stop")
                if include_usage:
                    usage = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": name,
                             "choices": [], "usage": _usage(c)}
                    yield f"data: {json.dumps(usage)}\n\n"
    except RouteError as exc:
        yield ChunkWriter.error(_failure(exc)).decode()
    finally:
        # A client that hangs up closes this generator; closing the backend stream cancels generation.
        await stream.aclose()
    yield "data: [DONE]\n\n"


class EngineServer(ThreadedServer):
    """`create_app(backend)` under uvicorn: on a thread (`start`/`stop`, for tests) or blocking (`run`)."""

    def __init__(self, backend: Backend, *, host: str = "127.0.0.1", port: int = 8000, served_name: str | None = None):
        self.backend = backend
        super().__init__(create_app(backend, served_name), host=host, port=port, name="engine-server",
                         timeout_graceful_shutdown=2)
