"""Bearer auth for `route serve`, as pure ASGI middleware built once around every path, and the
throttle on wrong keys it shares with the web view's sign-in.

A right key is always let in: the throttle counts the guilty, so a stranger presenting wrong keys
from the same address (a NAT, a reverse proxy, loopback) never locks out a tenant. Wrong keys are
counted twice, per client address and per presented key (a keyed hash of it, never the key), each
allowed `server.failed_key_rpm` a minute (a bucket: that many at once, then one every 60/limit s);
past either limit a wrong key is answered 429 instead of 401 (with Retry-After), so a guesser and
a client stuck on a stale key are told to slow down. The right key would still be let in from a
throttled address: that is the price of never refusing a tenant who shares it, and an affordable
one, since a key is at least 16 characters (`openssl rand -hex 32`, the errors suggest) and no
rate of guessing over HTTP finds one. A request presenting no key at all guesses nothing and is
not counted. Per process (each of `--workers` keeps its own), for at most `_REMEMBERED` addresses
and keys, the longest quiet forgotten first. The address is the socket's peer, or what a proxy the operator names forwards
(`server.forwarded_allow_ips`); a header from anyone else is ignored, so it cannot move the count.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

from policies.rate_limit import TokenBucket
from router.request_context import CLIENT_KEY
from router.server.endpoint import JSON, send_body
from router.server.errors import ApiError
from router.server.keys import KEY_SCOPE
from router.server.protocols import error_body_for, is_gemini

__all__ = ["BearerAuth", "KeyAttempts", "OPEN_PATHS", "client_address", "send_error_for"]

OPEN_PATHS = frozenset({"/healthz"})  # load balancers ask without a token
_REMEMBERED = 65536  # client addresses and wrong keys remembered at once
_KEY_HEADERS = (b"x-api-key", b"x-goog-api-key")  # Anthropic's clients, Gemini's


async def send_error_for(scope: dict, send: Any, err: ApiError) -> None:
    headers = [JSON, *((k.encode(), v.encode()) for k, v in err.headers.items())]
    await send_body(send, err.status, error_body_for(scope["path"], err), headers)


def client_address(scope: Mapping[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


class KeyAttempts:
    """Wrong keys per client address and per presented key, as token buckets of `per_minute`
    (policies/rate_limit.py). `clock`: monotonic seconds."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._lock = threading.Lock()
        self._salt = os.urandom(16)  # a wrong key is remembered by a hash no one outside can recompute

    def wrong(self, address: str, key: str | bytes) -> ApiError | None:
        """One wrong `key` from `address`: a 429 when either is out of attempts (nothing more is
        taken); None (the caller answers 401) while both have some, one taken from each."""
        raw = key.encode() if isinstance(key, str) else key
        names = ("a " + address, "k " + hashlib.blake2b(raw, key=self._salt, digest_size=16).hexdigest())
        with self._lock:
            now = self.clock()
            buckets = [self._bucket(name, now) for name in names]
            wait = max(bucket.wait(1, now) for bucket in buckets)
            if not wait:
                for bucket in buckets:
                    bucket.take(1, now)
        if not wait:
            return None
        seconds = max(1, math.ceil(wait - 1e-9))
        return ApiError(429, f"too many wrong keys from this address or of this key ({self.per_minute} a minute, "
                             f"server.failed_key_rpm); a wrong key is refused for {seconds} s. The right key is "
                             "always let in.", kind="rate_limit_error", code="too_many_wrong_keys",
                        headers={"retry-after": str(seconds)})

    def _bucket(self, name: str, now: float) -> TokenBucket:
        bucket = self._buckets.pop(name, None)
        if bucket is None:
            bucket = TokenBucket(self.per_minute, now)
            if len(self._buckets) >= _REMEMBERED:
                self._buckets.popitem(last=False)
        self._buckets[name] = bucket  # the most recent last
        return bucket


class BearerAuth:
    """Every path but OPEN_PATHS needs `Authorization: Bearer <token>` (or `x-api-key: <token>`,
    as Anthropic clients send it, or `x-goog-api-key` / `?key=`, as Gemini's do) with one of the
    server's keys; the name of the key goes into
    the scope (keys.KEY_SCOPE) for its rate limits. Compared in constant time, so response
    timing says nothing about a token; wrong keys are throttled per client address and per key
    (`attempts`), right ones never."""

    def __init__(self, app: Any, tokens: Mapping[str, str], attempts: KeyAttempts | None = None):
        self.app = app
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]
        self.attempts = attempts or KeyAttempts(10)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = _presented(scope)
            if given is None or not self._allowed(scope, given):
                refused = self.attempts.wrong(client_address(scope), b"\0".join(given)) if given else None
                await send_error_for(scope, send, refused or ApiError(
                    401, "missing or wrong API key: send `Authorization: Bearer <key>` or `x-api-key: <key>` with "
                         "the key held in the environment variable `route serve --api-key-env` names",
                    kind="authentication_error", code="invalid_api_key"))
                return
        await self.app(scope, receive, send)

    def _allowed(self, scope: dict, given: list[bytes]) -> bool:
        for value in given:
            for name, token in self._tokens:
                if hmac.compare_digest(value, token):
                    scope[KEY_SCOPE] = name
                    CLIENT_KEY.set(name)  # for the request's record; each request runs in a task of its own
                    return True
        return False


def _header_key(header: bytes, value: bytes) -> bytes | None:
    """The key one header presents: a bearer token, or the value of a key header."""
    if header == b"authorization":
        scheme, _, bearer = value.partition(b" ")
        return bearer.strip() if scheme.lower() == b"bearer" and bearer.strip() else None
    return value.strip() if header in _KEY_HEADERS and value.strip() else None


def _query_keys(scope: dict) -> list[bytes]:
    if not (scope.get("query_string") and is_gemini(scope["path"])):
        return []
    # Google's API takes the key in the URL too; route's access log writes the path alone.
    return [key.encode() for key in parse_qs(scope["query_string"].decode("latin-1")).get("key", ()) if key]


def _presented(scope: dict) -> list[bytes] | None:
    """The keys a request presents (a bearer token, an x-api-key, Gemini's x-goog-api-key, and
    under Gemini's paths its `?key=`); None when it presents none."""
    given = [key for header, value in scope["headers"] if (key := _header_key(header, value)) is not None]
    given += _query_keys(scope)
    return given or None
