"""What a request carries beyond its body, for every layer it passes through.

`CLIENT_KEY` is the name of the API key the current server request presented (None: no key,
or not a server request: the CLI and the Python API are the operator's). The server's auth
sets it per request; sessions are namespaced by it, the request log and labels record it. The
key itself is never carried.
"""

from __future__ import annotations

import contextvars

__all__ = ["CLIENT_KEY"]

CLIENT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("route_client_key", default=None)
