"""Signing in to the web view with the server's own keys, without a key in any URL.

A page cannot send `Authorization` with a navigation, and a key in a URL ends up in history and
logs; so the page posts the key once to /ui/login and gets a cookie (HttpOnly: scripts cannot
read it; SameSite=Strict: other sites cannot make the browser send it; Path=/ui: it is never
sent to the model endpoints). The cookie holds the key's *name*, an expiry and an HMAC of both
keyed by the key itself: any worker or replica holding the same keys checks it without shared
session state, it says nothing about the key, and changing a key invalidates its cookies.
Scripts may send the key as the API does (`Authorization: Bearer` or `x-api-key`) instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable, Mapping

__all__ = ["COOKIE", "ViewAuth"]

COOKIE = "route_ui"
LIFETIME_S = 12 * 3600


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


class ViewAuth:
    """`tokens`: key name -> key, as the server's auth has them; none: the view is open (loopback
    without keys, like the rest of the server)."""

    def __init__(self, tokens: Mapping[str, str], *, lifetime_s: float = LIFETIME_S,
                 clock: Callable[[], float] = time.time):
        self._tokens = {name: token.encode() for name, token in tokens.items()}
        self.lifetime_s = lifetime_s
        self.clock = clock

    @property
    def required(self) -> bool:
        return bool(self._tokens)

    def name_of_key(self, given: str | bytes) -> str | None:
        """The name of the key `given` is, compared in constant time; None if it is none of them."""
        raw = given.encode() if isinstance(given, str) else given
        found = None
        for name, token in self._tokens.items():
            if hmac.compare_digest(raw, token):
                found = name
        return found

    def _mac(self, name: str, expires: int) -> str:
        message = f"route-ui\0{name}\0{expires}".encode()
        return hmac.new(self._tokens[name], message, hashlib.sha256).hexdigest()

    def cookie_for(self, name: str) -> str:
        expires = int(self.clock() + self.lifetime_s)
        return f"{_b64(name)}.{expires}.{self._mac(name, expires)}"

    def name_of_cookie(self, value: str) -> str | None:
        """The key name a cookie was issued for, if it is genuine and not expired."""
        try:
            encoded, expires_text, mac = value.split(".")
            name, expires = _unb64(encoded), int(expires_text)
        except (ValueError, UnicodeDecodeError):
            return None
        if name not in self._tokens or expires < self.clock():
            return None
        return name if hmac.compare_digest(mac, self._mac(name, expires)) else None

    @staticmethod
    def key_in(headers: Mapping[str, str]) -> str:
        """The key a request presents in a header, as the API takes it ("" when none)."""
        scheme, _, bearer = headers.get("authorization", "").partition(" ")
        return bearer.strip() if scheme.lower() == "bearer" else headers.get("x-api-key", "").strip()

    def signed_in(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
        """The key name a request to the view is signed in as: its header, else its cookie."""
        given = self.key_in(headers)
        if given:
            return self.name_of_key(given)
        value = cookies.get(COOKIE)
        return self.name_of_cookie(value) if value else None

    def set_cookie(self, name: str, *, secure: bool) -> str:
        """The Set-Cookie header value that signs the browser in as key `name`."""
        return (f"{COOKIE}={self.cookie_for(name)}; Path=/ui; Max-Age={int(self.lifetime_s)}; HttpOnly; "
                f"SameSite=Strict{'; Secure' if secure else ''}")

    @staticmethod
    def clear_cookie(*, secure: bool) -> str:
        return f"{COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict{'; Secure' if secure else ''}"
