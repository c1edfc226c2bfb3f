"""The one deadline type: an absolute point on the `time.monotonic` clock.

Every layer that limits time -- a routed request, a consortium run, one backend attempt -- holds a
Deadline and narrows it with `within()`, so nested limits never add up past the outermost one.
"""

from __future__ import annotations

import time

__all__ = ["Deadline"]


class Deadline:
    """None as `at` means no deadline."""

    __slots__ = ("at",)

    def __init__(self, timeout_s: float | None = None, *, at: float | None = None):
        if at is not None:
            self.at: float | None = at
        else:
            self.at = None if timeout_s is None else time.monotonic() + timeout_s

    def remaining(self) -> float | None:
        """Seconds left (negative once passed), or None without a deadline."""
        return None if self.at is None else self.at - time.monotonic()

    def expired(self) -> bool:
        remaining = self.remaining()
        return remaining is not None and remaining <= 0

    def within(self, timeout_s: float | None) -> Deadline:
        """The earlier of this deadline and `timeout_s` from now."""
        if timeout_s is None:
            return Deadline(at=self.at)
        other = time.monotonic() + timeout_s
        return Deadline(at=other if self.at is None else min(self.at, other))

    def __repr__(self) -> str:
        remaining = self.remaining()
        return "Deadline(none)" if remaining is None else f"Deadline({remaining:.3f}s left)"
