"""How much of the server one client may take: `route serve`'s limits, with production defaults.

Enforced by router/server/http_guard.py (head timeout and size, connection count) and
router/server/endpoint.py (body timeout, for every POST); the body size limit is `--max-body`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerLimits"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What a client may take of the server. Defaults fit an editor or agent on a LAN or behind
    a proxy; each is a `route serve` option."""

    header_timeout_s: float = 10.0  # seconds for a whole request head
    body_timeout_s: float = 60.0  # seconds for a whole request body (16 MB at 270 KB/s)
    max_header_bytes: int = 64 * 1024  # request line plus headers
    max_connections: int = 1024  # open connections, idle keep-alive ones included

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "max_header_bytes", "max_connections"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
