"""Bearer auth for `route serve`, as pure ASGI middleware built once around every path."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from router.request_context import CLIENT_KEY
from router.server.endpoint import JSON, send_body
from router.server.errors import ApiError
from router.server.keys import KEY_SCOPE
from router.server.protocols import error_body_for

__all__ = ["BearerAuth", "OPEN_PATHS", "send_error_for"]

OPEN_PATHS = frozenset({"/healthz"})  # load balancers ask without a token


async def send_error_for(scope: dict, send: Any, err: ApiError) -> None:
    headers = [JSON, *((k.encode(), v.encode()) for k, v in err.headers.items())]
    await send_body(send, err.status, error_body_for(scope["path"], err), headers)


class BearerAuth:
    """Every path but OPEN_PATHS needs `Authorization: Bearer <token>` (or `x-api-key: <token>`,
    as Anthropic clients send it) with one of the server's keys; the name of the key goes into
    the scope (keys.KEY_SCOPE) for its rate limits. Compared in constant time, so response
    timing says nothing about a token."""

    def __init__(self, app: Any, tokens: Mapping[str, str]):
        self.app = app
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS and not self._allowed(scope):
            await send_error_for(scope, send, ApiError(
                401, "missing or wrong API key: send `Authorization: Bearer <key>` or `x-api-key: <key>` with the "
                     "key held in the environment variable `route serve --api-key-env` names",
                kind="authentication_error", code="invalid_api_key"))
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: dict) -> bool:
        for header, value in scope["headers"]:
            given: bytes | None = None
            if header == b"authorization":
                scheme, _, bearer = value.partition(b" ")
                given = bearer.strip() if scheme.lower() == b"bearer" else None
            elif header == b"x-api-key":
                given = value.strip()
            if given is None:
                continue
            for name, token in self._tokens:
                if hmac.compare_digest(given, token):
                    scope[KEY_SCOPE] = name
                    CLIENT_KEY.set(name)  # for the request's record; each request runs in a task of its own
                    return True
        return False
