"""Tables that fit the terminal without cutting a word: a long identifier (a model id such as
`google/diffusiongemma-26B-A4B-it`) breaks only after a `/` or `-`, where a reader sees that it
goes on, never in the middle of a name as rich's `fold` would."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["break_at", "fitted_width", "pieces"]

_PIECE = re.compile(r"[^/-]+[/-]*|[/-]+")
_SHORTEST = 3  # characters: a shorter last line gets the piece before it


def pieces(text: str) -> list[str]:
    """`text` cut after each run of `/` or `-`: the places where it may break."""
    return _PIECE.findall(text)


def break_at(text: str, width: int) -> str:
    """`text` on lines of at most `width` characters, broken only after a `/` or `-`; a piece
    longer than `width` stays whole on a line of its own."""
    lines: list[list[str]] = [[]]
    for piece in pieces(text):
        if lines[-1] and len("".join(lines[-1])) + len(piece) > width:
            lines.append([])
        lines[-1].append(piece)
    # A last line of a character or two ("claude-sonnet-4-" / "5") reads as a stray: take one more piece down.
    if len(lines) > 1 and len(lines[-2]) > 1 and len("".join(lines[-1])) < _SHORTEST:
        moved = lines[-2].pop()
        if len(moved) + len("".join(lines[-1])) <= width:
            lines[-1].insert(0, moved)
        else:
            lines[-2].append(moved)
    return "\n".join("".join(line) for line in lines)


def fitted_width(values: Sequence[str], available: int) -> int:
    """The width to break `values` at so they take at most `available` columns: all of it when
    they fit, else `available`, but never narrower than their longest unbreakable piece."""
    widest = max((len(v) for v in values), default=0)
    longest_piece = max((len(p) for v in values for p in pieces(v)), default=0)
    return widest if widest <= available else max(available, longest_piece)
