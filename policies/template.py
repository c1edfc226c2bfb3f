"""A client's template, learned from its own traffic: what repeats across its requests is its
harness, what varies is the user's words. The diffing is pure (texts in, a Template out); the
per-client state it drives (`Templates`, one per router, keyed by API key and client) is plain
memory, no I/O and no clock; the task reader (policies/task.py) is handed what it learned.

Two of a client's latest user turns with different words share what the client wrote around
them: the text both open with (a label line, a context block) and the text both end with (a page
of rules, an environment part). `learn` finds both, cut at a line's or a word's edge so that no
word of the user's is taken for the client's; `words` applies them to a later turn. A template
whose fixed parts are too short to be a client's (`MIN_FIXED`) is none: two questions that
happen to open with "What is" teach nothing. The general rules of policies/wrappers.py read a
client's first request; a template reads every request after its second.

A client is its API key with its system prompt (its numbers left out: a date, a count of files)
and the names of its tools: two agents behind one key have two templates. A template is adopted
once a third task has the same fixed parts as the two it was learned from; a turn that does not
fit it is read by the general rules. Only a client's tasks are compared, one conversation's later
turns never (a request holding the last task's turn is that conversation going on). Recurring
context turns -- the same user turn, numbers aside, before the user's words in two tasks -- are
learned alongside.

Cost: one comparison of two texts from each end (C-speed slicing, halving). Small by
construction: at most `max_entries` clients (least recently seen dropped first), each holding its
last user turn (at most `KEPT` characters twice over: a longer turn is not learned from), the
digests of the user turns it sent before that one, and a template of at most `KEPT` characters.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from backends.types import Message, content_text

__all__ = ["KEPT", "MIN_FIXED", "Learned", "Template", "Templates", "digest", "learn"]

MIN_FIXED = 24  # characters of fixed text, before and after together, that make a template
KEPT = 16_384  # characters of fixed text a template may hold (the router keeps one per client)
_DIGITS = re.compile(r"\d+")
_SYSTEM_ROLES = ("system", "developer")
_CONTEXT_TURNS = 8  # earlier user turns of a request whose digests are compared


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


def _earlier(messages: list[Message], at: int) -> frozenset[str]:
    """Digests of the user turns before `at` (the last _CONTEXT_TURNS of them)."""
    found: list[str] = []
    for i in range(at - 1, -1, -1):
        if messages[i].get("role") == "user":
            found.append(digest(content_text(messages[i].get("content"))))
            if len(found) == _CONTEXT_TURNS:
                break
    return frozenset(found)


@dataclass(slots=True)
class _Client:
    last: str  # the latest user turn's text of its last request with other words
    earlier: frozenset[str]  # digests of the user turns that request sent before it
    candidate: Template | None = None
    template: Template | None = None
    context: frozenset[str] = field(default_factory=frozenset)


class Templates:
    """The learned templates of one router's clients (see the module docstring)."""

    def __init__(self, max_entries: int = 1024):
        self.max_entries = max_entries
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    def __len__(self) -> int:
        return len(self._clients)

    def read(self, messages: list[Message], tools: Any, owner: str | None) -> Learned | None:
        """What this client's traffic taught so far, this request included (None: nothing).
        A request of a conversation going on costs a key and one comparison; the digests of its
        earlier turns are taken only when its latest turn is another task's."""
        at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
        if at is None:
            return None
        latest = content_text(messages[at].get("content"))
        key = self._key(messages, tools, owner)
        client = self._clients.get(key)
        if client is None:
            self._put(key, _Client(latest, _earlier(messages, at)))
            return None
        self._clients.move_to_end(key)
        if latest != client.last and len(latest) <= 2 * KEPT:  # a longer turn is not learned from
            self._learn(client, latest, _earlier(messages, at))
        return Learned(client.template, client.context) if client.template or client.context else None

    @staticmethod
    def _learn(client: _Client, latest: str, earlier: frozenset[str]) -> None:
        if digest(client.last) in earlier:
            return  # the same conversation going on: its later turns are not another task's
        if client.candidate is not None and client.candidate.words(latest) is not None:
            client.template = client.candidate  # a third task fits what two taught: adopted
        client.candidate = learn(client.last, latest) or client.candidate
        client.context = client.earlier & earlier
        client.last, client.earlier = latest, earlier

    @staticmethod
    def _key(messages: list[Message], tools: Any, owner: str | None) -> str:
        """The client: the API key, its system prompt's ends (numbers aside; hashing all of a
        26 KB prompt on every request is work for nothing) and its tools' names."""
        system = next((content_text(m.get("content")) for m in messages if m.get("role") in _SYSTEM_ROLES), "")
        names = sorted(str((t.get("function") or t).get("name")) for t in tools or () if isinstance(t, dict))
        return f"{owner or ''}\x1f{digest(system[:512] + system[-512:])}\x1f{','.join(names)}"

    def _put(self, key: str, client: _Client) -> None:
        self._clients[key] = client
        while len(self._clients) > self.max_entries:
            self._clients.popitem(last=False)
