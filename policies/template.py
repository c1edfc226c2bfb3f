"""A client's template, learned from its own traffic: what repeats across its requests is its
harness, what varies is the user's words. Pure: texts in, a Template out; the router keeps one
per API key and client (router/templates.py) and hands it to the task reader (policies/task.py).

Two of a client's latest user turns with different words share what the client wrote around
them: the text both open with (a label line, a context block) and the text both end with (a page
of rules, an environment part). `learn` finds both, cut at a line's or a word's edge so that no
word of the user's is taken for the client's; `words` applies them to a later turn. A template
whose fixed parts are too short to be a client's (`MIN_FIXED`) is none: two questions that
happen to open with "What is" teach nothing. The general rules of policies/wrappers.py read a
client's first request; a template reads every request after its second.

Cost: one comparison of two texts from each end (C-speed slicing, halving); a template holds
at most `KEPT` characters.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = ["KEPT", "MIN_FIXED", "Learned", "Template", "digest", "learn"]

MIN_FIXED = 24  # characters of fixed text, before and after together, that make a template
KEPT = 16_384  # characters of fixed text a template may hold (the router keeps one per client)
_DIGITS = re.compile(r"\d+")


def digest(text: str) -> str:
    """A user turn's digest, its numbers left out (a date, a count of files change between tasks)."""
    return hashlib.blake2b(_DIGITS.sub("#", text).encode("utf-8", "replace"), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Template:
    """The fixed text a client writes before and after the user's words in a user turn."""

    prefix: str
    suffix: str

    def words(self, text: str) -> str | None:
        """The user's words of `text` when it has this template's fixed parts around some
        words of its own, else None."""
        if len(text) <= len(self.prefix) + len(self.suffix) or not text.startswith(self.prefix):
            return None
        if self.suffix and not text.endswith(self.suffix):
            return None
        middle = text[len(self.prefix):len(text) - len(self.suffix)]
        return middle if middle.strip() else None

    @property
    def chars(self) -> int:
        return len(self.prefix) + len(self.suffix)


@dataclass(frozen=True, slots=True)
class Learned:
    """What the reader uses of a client's traffic: its template (None until adopted) and the
    digests of the context turns it sends before the user's words."""

    template: Template | None
    context: frozenset[str] = frozenset()

    def context_turn(self, text: str) -> bool:
        return bool(self.context) and digest(text) in self.context


def _common_prefix(a: str, b: str) -> int:
    """How many characters `a` and `b` open with alike (by halving: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, min(len(a), len(b), limit)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[-mid:] == b[-mid:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _prefix_edge(text: str, n: int) -> int:
    """`n` moved back to just after a line break or a label's ": ": two tasks that open with the
    same words ("Run the ...") keep them, the client's part ends where a line or a label does."""
    return max(text.rfind("\n", 0, n) + 1, text.rfind(": ", 0, n) + 2 if text.rfind(": ", 0, n) >= 0 else 0)


def _suffix_edge(text: str, n: int) -> int:
    """`n` (characters from the end) moved forward to a line break: the client's part starts on
    a line of its own, two tasks that end alike keep their last words."""
    if n == 0:
        return 0
    start = text.find("\n", len(text) - n)
    return len(text) - start if start >= 0 else 0


def learn(before: str, now: str) -> Template | None:
    """The template two user turns of one client share, or None when they share too little or
    are the same turn (nothing varies: the words cannot be told from the template)."""
    if before == now:
        return None
    head = _prefix_edge(now, _common_prefix(before, now))
    tail = _suffix_edge(now, _common_suffix(before, now, min(len(before), len(now)) - head))
    if head + tail < MIN_FIXED or head + tail >= len(now):
        return None
    if head + tail > KEPT:
        return None  # a template is kept in memory per client: a page of it, not a book
    return Template(now[:head], now[len(now) - tail:] if tail else "")
