"""Bearer auth for `route serve`, as pure ASGI middleware built once around every path, and the
throttle on wrong keys it shares with the web view's sign-in.

Keys are long and random, so guessing one is hopeless; the throttle keeps it so, and keeps a
guesser from costing the server a comparison per key it tries. Each client address may present
`server.failed_key_rpm` wrong keys a minute (a bucket: that many at once, then one every
60/limit s); past that, its requests are refused with a 429 before any key is compared -- a
right key too, so the answer says nothing about which guesses were right. A request presenting
no key at all guesses nothing and is not counted. Per process (each of `--workers` keeps its
own), for at most `_ADDRESSES` addresses, the longest quiet forgotten first.
"""

from __future__ import annotations

import hmac
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from policies.rate_limit import TokenBucket
from router.request_context import CLIENT_KEY
from router.server.endpoint import JSON, send_body
from router.server.errors import ApiError
from router.server.keys import KEY_SCOPE
from router.server.protocols import error_body_for

__all__ = ["BearerAuth", "KeyAttempts", "OPEN_PATHS", "client_address", "send_error_for"]

OPEN_PATHS = frozenset({"/healthz"})  # load balancers ask without a token
_ADDRESSES = 65536  # client addresses remembered at once


async def send_error_for(scope: dict, send: Any, err: ApiError) -> None:
    headers = [JSON, *((k.encode(), v.encode()) for k, v in err.headers.items())]
    await send_body(send, err.status, error_body_for(scope["path"], err), headers)


def client_address(scope: Mapping[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


class KeyAttempts:
    """Wrong keys per client address, as token buckets of `per_minute` (policies/rate_limit.py).
    `clock`: monotonic seconds."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._lock = threading.Lock()

    def refusal(self, address: str) -> ApiError | None:
        """A 429 for an address out of attempts (nothing is taken); None while it has some."""
        with self._lock:
            bucket = self._buckets.get(address)
            wait = bucket.wait(1, self.clock()) if bucket is not None else 0.0
        if not wait:
            return None
        seconds = max(1, math.ceil(wait - 1e-9))
        return ApiError(429, f"too many wrong keys from this address ({self.per_minute} a minute, "
                             f"server.failed_key_rpm); nothing is checked for {seconds} s. Retry after that with the "
                             "right key.", kind="rate_limit_error", code="too_many_wrong_keys",
                        headers={"retry-after": str(seconds)})

    def failed(self, address: str) -> None:
        """One wrong key from `address`."""
        with self._lock:
            now = self.clock()
            bucket = self._buckets.pop(address, None)
            if bucket is None:
                bucket = TokenBucket(self.per_minute, now)
                if len(self._buckets) >= _ADDRESSES:
                    self._buckets.popitem(last=False)
            bucket.take(1, now)
            self._buckets[address] = bucket  # the most recent last


class BearerAuth:
    """Every path but OPEN_PATHS needs `Authorization: Bearer <token>` (or `x-api-key: <token>`,
    as Anthropic clients send it) with one of the server's keys; the name of the key goes into
    the scope (keys.KEY_SCOPE) for its rate limits. Compared in constant time, so response
    timing says nothing about a token; wrong keys are throttled per client address
    (`attempts`)."""

    def __init__(self, app: Any, tokens: Mapping[str, str], attempts: KeyAttempts | None = None):
        self.app = app
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]
        self.attempts = attempts or KeyAttempts(10)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            address = client_address(scope)
            refused = self.attempts.refusal(address)
            if refused is not None:
                await send_error_for(scope, send, refused)
                return
            given = _presented(scope)
            if given is None or not self._allowed(scope, given):
                if given is not None:
                    self.attempts.failed(address)
                await send_error_for(scope, send, ApiError(
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


def _presented(scope: dict) -> list[bytes] | None:
    """The keys a request presents (a bearer token, an x-api-key); None when it presents none."""
    given: list[bytes] = []
    for header, value in scope["headers"]:
        if header == b"authorization":
            scheme, _, bearer = value.partition(b" ")
            if scheme.lower() == b"bearer" and bearer.strip():
                given.append(bearer.strip())
        elif header == b"x-api-key" and value.strip():
            given.append(value.strip())
    return given or None
