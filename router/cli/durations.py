"""Parse human durations for --deadline and --since: "2s", "500ms", "1.5", "3m", "1h"."""

from __future__ import annotations

import re

from backends.errors import UsageError

__all__ = ["parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d)?\s*$")


def parse_duration(text: str, *, option: str = "--deadline") -> float:
    """Seconds. A bare number is seconds."""
    match = _PATTERN.match(text or "")
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"{option} {text!r} is not a duration; write a positive number with a unit, "
                         "e.g. 500ms, 2s, 1.5m or 1h (a bare number means seconds).")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]
