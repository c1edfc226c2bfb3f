"""`POST /v1/feedback`: a client's verdict on one logged request, for `route calibrate --from-log`.

Body: `{"id": <the request log's id or a trace id>, "verdict": "good" | "bad"}`; answers
`{"recorded": true}`, or an OpenAI-shaped 400 naming what was wrong. Read by the one request
flow (router/server/endpoint.py), with its body limits.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson

from backends.errors import UsageError
from router.server.endpoint import Plain
from router.server.protocols.validation import bad_request, decode

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["feedback_handler"]

_MAX_BODY = 64 * 1024


def feedback_handler(router: Router) -> Plain:
    async def handle(raw: bytes, scope: dict) -> bytes:
        data = decode(raw, '{"id": "<request id>", "verdict": "good" | "bad"}')
        request_id = data.get("id")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            raise bad_request('feedback needs "id": the request log id (`route log`) or a trace id', "id")
        try:
            await asyncio.to_thread(router.feedback, request_id, str(data.get("verdict")))
        except UsageError as exc:
            raise bad_request(str(exc)) from None
        return orjson.dumps({"recorded": True})

    # A verdict is a few bytes: a larger body is refused as it arrives, never read whole.
    return Plain(handle, lambda err: err.body(), max_body=_MAX_BODY)
