"""`POST /v1/feedback`: a client's verdict on one logged request, for `route calibrate --from-log`.

Body: `{"id": <the request log's id or a trace id>, "verdict": "good" | "bad"}`; answers
`{"recorded": true}`, or an OpenAI-shaped 400 naming what was wrong.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson
from starlette.requests import Request
from starlette.responses import Response

from backends.errors import UsageError
from router.server.wire import ApiError

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["feedback_endpoint"]

_MAX_BODY = 64 * 1024


def _bad(message: str) -> Response:
    return Response(ApiError(400, message, code="invalid_request").body(), status_code=400,
                    media_type="application/json")  # fmt: skip


async def feedback_endpoint(router: Router, request: Request) -> Response:
    body = await request.body()
    if len(body) > _MAX_BODY:
        return _bad(f"feedback body over {_MAX_BODY} bytes; send only {{\"id\", \"verdict\"}}")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _bad('feedback body is not JSON; send {"id": "<request id>", "verdict": "good" | "bad"}')
    if not isinstance(data, dict) or not isinstance(data.get("id"), (str, int)) or isinstance(data.get("id"), bool):
        return _bad('feedback needs "id": the request log id (`route log`) or a trace id')
    try:
        await asyncio.to_thread(router.feedback, data["id"], str(data.get("verdict")))
    except UsageError as exc:
        return _bad(str(exc))
    return Response(orjson.dumps({"recorded": True}), media_type="application/json")
