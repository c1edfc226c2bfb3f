"""Stream events that are one checked event with another string in one place.

A server writes a thousand-token answer as a thousand events that differ only in their piece of
text: the same id, model, time and structure around a different string. Parsing each whole costs
a microsecond a token, nearly all of it re-reading the same 200 bytes. When one read holds many
events, one of them is parsed whole and checked to be a plain piece of text; the bytes before and
after its string are the template, and every event that is the template around a string is that
event with its string, so only the strings are parsed, all of a run as one JSON array.

Sound, not a guess. The place is found by writing a sentinel there and seeing it come back as the
piece (so it is the piece's string, whatever the provider's key order or spacing); JSON is
context-free, so a string token there may be any other. That each event's middle is exactly one
string is what the array confirms: as many strings as events, none ending in a backslash that
could have escaped the template's closing quote. Anything else is parsed event by event, as
before, and named if it is malformed.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from itertools import groupby, repeat
from typing import Any

import orjson

__all__ = ["template_runs"]

_MIN_RUN = 8  # below this, one parse an event costs less than finding the template
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SENTINELS = ("\x00", "\x01")  # two, so a piece that happens to equal one still tells


def template_runs(batch: list[bytes], key: bytes, piece: Callable[[Any], str | None]) -> Iterator[list[bytes] | str]:
    """`batch` in order, as lists of events to parse one by one and, for each run of events that
    are a template around a string, the run's pieces joined. `piece(event)` is the text of a
    parsed event whose only effect is that text (else None), read from the string after `key`."""
    if len(batch) < _MIN_RUN:
        yield batch
        return
    template = _template(batch[len(batch) // 2], key, piece)
    if template is None:
        yield batch
        return
    before, after = template
    fits = map(operator.and_, map(bytes.startswith, batch, repeat(before)), map(bytes.endswith, batch, repeat(after)))
    longest = len(before) + len(after)
    fits = map(operator.and_, fits, map(operator.ge, map(len, batch), repeat(longest)))
    start = 0
    for fit, group in groupby(fits):
        end = start + len(list(group))
        run = batch[start:end]
        joined = _joined(run, len(before), len(after)) if fit and len(run) >= _MIN_RUN else None
        yield run if joined is None else joined
        start = end


def _template(event: bytes, key: bytes, piece: Callable[[Any], str | None]) -> tuple[bytes, bytes] | None:
    """The bytes before and after the piece's string in `event`, quotes included: (before, after)."""
    try:
        parsed = orjson.loads(event)
    except ValueError:
        return None
    text = piece(parsed)
    at = event.rfind(key)
    if text is None or at < 0:
        return None
    value = event[at + len(key):]
    found = _STRING.match(event, len(event) - len(value.lstrip()))
    if found is None:
        return None
    before, after = event[:found.start() + 1], event[found.end() - 1:]
    for sentinel in _SENTINELS:
        try:
            if piece(orjson.loads(before + orjson.dumps(sentinel)[1:-1] + after)) != sentinel:
                return None
        except ValueError:
            return None
    return before, after


def _joined(run: list[bytes], before: int, after: int) -> str | None:
    """The run's strings joined, or None when a middle is not exactly one string."""
    middles: list[bytes] = list(map(operator.getitem, run, repeat(slice(before, -after))))  # type: ignore[arg-type]
    if any(map(bytes.endswith, middles, repeat(b"\\"))):
        return None
    try:
        pieces = orjson.loads(b'["' + b'","'.join(middles) + b'"]')
    except ValueError:
        return None
    if len(pieces) != len(run) or set(map(type, pieces)) != {str}:
        return None
    return "".join(pieces)
