"""`POST /v1/feedback`: a client's verdict on one logged request, for `route calibrate --from-log`.

Body: `{"id": <the request log's id or a trace id>, "verdict": "good" | "bad"}`; answers
`{"recorded": true}`, or an OpenAI-shaped error naming what was wrong: 400, or as the feedback
rules say (router/store/feedback.py: 404 no such request, 403 not this key's, 429 too many).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson
from starlette.requests import Request
from starlette.responses import Response

from backends.errors import UsageError
from router.server.keys import KEY_SCOPE
from router.server.wire import ApiError
from router.store.feedback import is_admin, record_feedback

if TYPE_CHECKING:
    from router.core import Router

__all__ = ["feedback_endpoint"]

_MAX_BODY = 64 * 1024


def _bad(message: str, status: int = 400, retry_after_s: int | None = None) -> Response:
    headers = {"retry-after": str(retry_after_s)} if retry_after_s else None
    return Response(ApiError(status, message, code="invalid_request").body(), status_code=status, headers=headers,
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
    key = request.scope.get(KEY_SCOPE)  # the name of the client key; bound to the request it judges
    try:
        await asyncio.to_thread(record_feedback, router, data["id"], str(data.get("verdict")), key=key,
                                admin=is_admin(router.config, key))
    except UsageError as exc:
        return _bad(str(exc), getattr(exc, "status", 400), getattr(exc, "retry_after_s", None))
    return Response(orjson.dumps({"recorded": True}), media_type="application/json")
