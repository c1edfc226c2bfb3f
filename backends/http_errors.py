"""Translate HTTP client failures (aiohttp's, as the openai and anthropic kinds call with it)
and HTTP error statuses into the project's error tree, in one place."""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import Mapping

from backends.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    RateLimited,
    Unreachable,
    Where,
)

__all__ = ["error_for_status", "is_transport_error", "parse_retry_after", "translate_transport_error"]

_BODY_LIMIT = 2000  # characters of an error body kept for the message


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header, which may be a number or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_to_datetime(value) if value else None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


def error_for_status(status: int, headers: Mapping[str, str], body: str, *, backend: str,
                     model: str) -> BackendError:
    """`headers` looked up in lower case: pass a case-insensitive mapping (aiohttp's, httpx's)."""
    body = body[:_BODY_LIMIT]
    detail = f"HTTP {status}: {body.strip()[:300]}" if body.strip() else f"HTTP {status}"
    if status == 429:
        retry_after = parse_retry_after(headers.get("retry-after"))
        return RateLimited(f"rate limited ({detail})", retry_after=retry_after, backend=backend, model=model,
                           status=status, body=body)
    kind: type[BackendError]
    if status in (401, 403):
        kind, what = AuthError, f"the server refused the API key ({detail}); check the key's environment variable"
    elif status in (408, 409) or status >= 500:
        kind, what = BackendUnavailable, f"server error ({detail})"
    else:
        kind, what = BadRequest, f"the server rejected the request ({detail})"
    return kind(what, backend=backend, model=model, status=status, body=body)


def is_transport_error(exc: BaseException) -> bool:
    """An aiohttp client failure (connecting, sending, reading) or a timeout: not our bug, the
    connection's. aiohttp is not imported for this: without it, no error can be its."""
    aiohttp = sys.modules.get("aiohttp")
    return isinstance(exc, TimeoutError) or (aiohttp is not None and isinstance(exc, aiohttp.ClientError))


def translate_transport_error(exc: BaseException, *, url: str, backend: str, model: str) -> BackendError:
    import aiohttp

    where = Where(backend=backend, model=model)
    if isinstance(exc, TimeoutError):  # aiohttp's connect timeouts are TimeoutErrors too
        return BackendTimeout(f"no answer from {url} in time ({type(exc).__name__})", **where)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Unreachable(f"cannot connect to {url} ({exc.os_error or 'connection refused'})", **where)
    return BackendUnavailable(f"connection to {url} failed: {type(exc).__name__}: {exc}", **where)


def connection_failure(exc: BaseException) -> str | None:
    """What failed to connect, when `exc` was caused by a connection that never opened (refused,
    no route, name not resolved), however deeply wrapped; None otherwise. litellm reports these
    as HTTP 500 InternalServerError, which would read as the provider's fault."""
    import httpx

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (httpx.ConnectError, ConnectionRefusedError, ConnectionResetError)) or \
                type(current).__name__ in ("ClientConnectorError", "gaierror", "APIConnectionError"):
            return f"{type(current).__name__}: {current}"[:300]
        current = current.__cause__ or current.__context__
    return None
