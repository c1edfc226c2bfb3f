"""Mounts the translated APIs (Anthropic Messages, OpenAI Responses) on the `route serve` app,
and picks the error shape a path's clients parse."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from starlette.routing import Route

from router.server.anthropic_protocol import AnthropicDialect, count_tokens
from router.server.chat import _ClientGone, read_body
from router.server.responses_protocol import ResponsesDialect
from router.server.translated import TranslatedEndpoint
from router.server.wire import ApiError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from router.core import Router
    from router.server.metrics import Metrics
    from router.server.models import ModelNames

__all__ = ["add_translated_routes", "shaped_for"]

_ANTHROPIC_PATHS = ("/v1/messages", "/messages")


class _AnthropicError(ApiError):
    def body(self) -> bytes:
        return AnthropicDialect().error_body(self)


def shaped_for(path: str, err: ApiError) -> ApiError:
    """`err` in the shape of the API `path` belongs to (OpenAI's unless Anthropic's)."""
    if not path.startswith(_ANTHROPIC_PATHS):
        return err
    return _AnthropicError(err.status, err.message, kind=err.kind, code=err.code, param=err.param,
                           headers=err.headers)


class _CountTokens:
    """POST /v1/messages/count_tokens: `{"input_tokens": N}`, an estimate (see count_tokens)."""

    def __init__(self, body_limit_bytes: int):
        self.body_limit = body_limit_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        try:
            status, body = 200, orjson.dumps({"input_tokens": count_tokens(await read_body(scope, receive,
                                                                                           self.body_limit))})
        except ApiError as err:
            status, body = err.status, AnthropicDialect().error_body(err)
        except _ClientGone:
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def add_translated_routes(app: FastAPI, router: Router, metrics: Metrics, names: ModelNames, *,
                          body_limit_bytes: int) -> None:
    messages = TranslatedEndpoint(router, metrics, names, AnthropicDialect(), body_limit_bytes=body_limit_bytes)
    responses = TranslatedEndpoint(router, metrics, names, ResponsesDialect(), body_limit_bytes=body_limit_bytes)
    counter = _CountTokens(body_limit_bytes)
    for prefix in ("/v1", ""):  # some clients put the /v1 in their base URL, some do not
        app.router.routes.append(Route(f"{prefix}/messages", messages, methods=["POST"]))
        app.router.routes.append(Route(f"{prefix}/messages/count_tokens", counter, methods=["POST"]))
        app.router.routes.append(Route(f"{prefix}/responses", responses, methods=["POST"]))
