"""Translate HTTP client failures (aiohttp's, as the openai and anthropic kinds call with it)
into the project's error tree, in one place. What an error status means is backends/faults.py."""

from __future__ import annotations

import email.utils
import sys
import time

from backends.errors import BackendError, BackendTimeout, BackendUnavailable, Unreachable, Where

__all__ = ["connection_failure", "is_transport_error", "parse_retry_after", "translate_transport_error"]


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
        # By type, never by litellm's APIConnectionError: litellm raises that for any failure of
        # its own too (a request it could not write), and a real refusal is in the chain anyway.
        if isinstance(current, (httpx.ConnectError, ConnectionRefusedError, ConnectionResetError)) or \
                type(current).__name__ in ("ClientConnectorError", "gaierror"):
            return f"{type(current).__name__}: {current}"[:300]
        current = current.__cause__ or current.__context__
    return None
