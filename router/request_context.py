"""What a request carries beyond its body, for every layer it passes through.

`CLIENT_KEY` is the name of the API key the current server request presented (None: no key,
or not a server request: the CLI and the Python API are the operator's). The server's auth
sets it per request; sessions are namespaced by it, the request log and labels record it. The
key itself is never carried.

`CONVERSATION` is the conversation a terminal chat's turn belongs to (`route chat`, `route
--continue`): the request log files a turn under it when the decision has no session plan of its
own, as a turn pinned to one backend (`!model NAME`) has not, so a conversation's turns stay one
conversation however each was answered.
"""

from __future__ import annotations

import contextvars

__all__ = ["CLIENT_KEY", "CONVERSATION"]

CLIENT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("route_client_key", default=None)
CONVERSATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("route_conversation", default=None)
