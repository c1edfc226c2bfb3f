"""`POST /v1/feedback`: a client's verdict on one logged request, for `route calibrate --from-log`.

Body: `{"id": <the request log's id or a trace id>, "verdict": "good" | "bad"}`; answers
`{"recorded": true}`, or an OpenAI-shaped error naming what was wrong: 400, or as the feedback
rules say (router/store/feedback.py: 404 no such request, 403 not this key's, 429 too many).
Read by the one request flow (router/server/endpoint.py), with its body limits.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson

from backends.errors import UsageError
from router.server.endpoint import Plain
from router.server.errors import ApiError
from router.server.keys import KEY_SCOPE
from router.server.protocols.base import bad_request, decode
from router.store.feedback import is_admin

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["feedback_handler"]

_MAX_BODY = 64 * 1024


def feedback_handler(router: RouterService) -> Plain:
    async def handle(raw: bytes, scope: dict) -> bytes:
        data = decode(raw, '{"id": "<request id>", "verdict": "good" | "bad"}')
        request_id = data.get("id")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            raise bad_request('feedback needs "id": the request log id (`route log`) or a trace id', "id")
        key = scope.get(KEY_SCOPE)  # the name of the client key: bound to the requests it judges
        try:
            await asyncio.to_thread(router.verdicts.record, request_id, str(data.get("verdict")), key=key,
                                    admin=is_admin(router.view.config, key))
        except UsageError as exc:
            status = getattr(exc, "status", 400)
            retry = getattr(exc, "retry_after_s", None)
            raise ApiError(status, str(exc), code="invalid_request",
                           headers={"retry-after": str(retry)} if retry else None) from None
        return orjson.dumps({"recorded": True})

    # A verdict is a few bytes: a larger body is refused as it arrives, never read whole.
    return Plain(handle, lambda err: err.body(), max_body=_MAX_BODY)
