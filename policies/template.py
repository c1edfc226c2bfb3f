"""A client's template, learned from its own traffic: what repeats across its requests is its
harness, what varies is the user's words. The diffing is pure (texts in, a Template out); the
per-client state it drives (`Templates`, one per router) is plain memory, no I/O and no clock;
the task reader (policies/task.py) is handed what it learned.

Two of a client's tasks with different words share what the client wrote around them: the text
both open with (a label line) and the text both end with (a page of rules, a line of format).
`learn` finds both, cut at a line's or a word's edge so that no word of the user's is taken for
the client's; `words` applies them to a later turn. A template whose fixed parts are too short to
be a client's (`MIN_FIXED`) is none: two questions that happen to open with "What is" teach
nothing. What is compared is the words the request's own structure leaves (policies/harness.py:
blocks, declared fields, known shapes set aside first), so a template never swallows a block the
structure reads, and the structure is read around it on every request.

A client is one API key's app: its system prompt (its numbers left out: a date, a count of files)
and the names of its tools, within that key. Only a client's request teaches its template -- one
with a system prompt or tool schemas; a person's bare prompt never teaches nor is read by one, so
a user's fixed instruction over a batch is the user's. A template learned from two tasks is read
on a third that fits it, and is adopted when one does; a turn that does not fit is read as on a
first request. Only a client's tasks are compared, one conversation's later turns never (a
request holding the last task's turn is that conversation going on). Recurring context turns --
the same user turn, numbers aside, before the user's words in two tasks -- are learned alongside.

Deciding reads (`lookup`) and never writes: the same request reads the same whatever another key
or app sent, and however often it was explained. What a request teaches is taken when it is
decided (`Sample`) and learned after its answer (`learn`), as its own step.

Cost: a lookup is a key and a dictionary read; learning is one comparison of two texts from each
end (C-speed slicing, halving). Small by construction: at most `max_entries` clients, at most
`per_key` of them for one API key (a key's new app displaces that key's least recent one, never
another key's beyond its share), each holding the ends of its last task's words (`KEPT`
characters of each) and templates of at most `KEPT` characters.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from backends.types import Message, content_text

__all__ = ["KEPT", "MIN_FIXED", "Learned", "Sample", "Template", "Templates", "digest", "learn"]

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
        words of its own, else None. The words end where the fixed end first follows them: what
        a client's loop appends after its template (a ReAct scratchpad written into the same
        turn: the model's step, the tool's observation) is not the user's."""
        if len(text) <= len(self.prefix) + len(self.suffix) or not text.startswith(self.prefix):
            return None
        end = text.find(self.suffix, len(self.prefix) + 1) if self.suffix else len(text)
        if end < 0:
            return None
        middle = text[len(self.prefix):end]
        return middle if middle.strip() else None

    @property
    def chars(self) -> int:
        return len(self.prefix) + len(self.suffix)


@dataclass(frozen=True, slots=True)
class Learned:
    """What the reader uses of a client's traffic: its adopted template, one learned from its
    last two tasks (read on a turn that fits it), and the digests of the context turns it sends
    before the user's words."""

    template: Template | None
    context: frozenset[str] = frozenset()
    candidate: Template | None = None

    def templates(self) -> tuple[Template, ...]:
        """The templates a turn is tried against, the adopted one first."""
        return tuple(t for t in (self.template, self.candidate) if t is not None)

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


def _ends(words: str) -> str:
    """What is kept of a task's words to compare the next task's with: all of them, or their
    first and last KEPT characters (a template's fixed parts are no longer than that)."""
    return words if len(words) <= 2 * KEPT else words[:KEPT] + words[-KEPT:]


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Sample:
    """What one request can teach its client's template, taken when it is decided: the client
    (API key and app), the latest user turn's words as its structure read them, the digests of
    that turn and of the user turns before it."""

    owner: str
    client: str
    words: str
    turn: str
    earlier: frozenset[str]


@dataclass(slots=True)
class _Client:
    words: str  # the ends of the latest task's words (`_ends`)
    turn: str  # digest of that task's user turn as sent
    earlier: frozenset[str]  # digests of the user turns that request sent before it
    candidate: Template | None = None
    template: Template | None = None
    context: frozenset[str] = field(default_factory=frozenset)

    def learned(self) -> Learned | None:
        if self.template is None and self.candidate is None and not self.context:
            return None
        return Learned(self.template, self.context, self.candidate)


class Templates:
    """The learned templates of one router's clients (see the module docstring)."""

    def __init__(self, max_entries: int = 1024, per_key: int = 64):
        self.max_entries, self.per_key = max_entries, per_key
        self._clients: OrderedDict[tuple[str, str], _Client] = OrderedDict()
        self._per_owner: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def client(self, messages: list[Message], tools: Any, owner: str | None) -> tuple[str, str] | None:
        """(API key, app) of a client's request; None for a person's bare request (no system
        prompt, no tools), which no template reads or learns from. The app is the system
        prompt's ends (numbers aside; hashing all of a 26 KB prompt on every request is work
        for nothing) and its tools' names."""
        system = next((content_text(m.get("content")) for m in messages if m.get("role") in _SYSTEM_ROLES), None)
        if system is None and not tools:
            return None
        system = system or ""
        names = sorted(str((t.get("function") or t).get("name")) for t in tools or () if isinstance(t, dict))
        return owner or "", f"{digest(system[:512] + system[-512:])}\x1f{','.join(names)}"

    def lookup(self, client: tuple[str, str] | None) -> Learned | None:
        """What `client`'s answered requests taught so far (None: nothing). Reads only."""
        found = self._clients.get(client) if client is not None else None
        return found.learned() if found is not None else None

    @staticmethod
    def sample(client: tuple[str, str] | None, messages: list[Message], words: str) -> Sample | None:
        """What this request can teach, `words` its latest user turn as the structure read it."""
        if client is None:
            return None
        at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
        if at is None or not words:
            return None
        turn = digest(content_text(messages[at].get("content")))
        return Sample(client[0], client[1], _ends(words), turn, _earlier(messages, at))

    def learn(self, sample: Sample) -> None:
        """After a request's answer: what it taught its client (a new task against the last one)."""
        key = (sample.owner, sample.client)
        client = self._clients.get(key)
        if client is None:
            self._put(key, _Client(sample.words, sample.turn, sample.earlier))
            return
        self._clients.move_to_end(key)
        if sample.turn == client.turn or client.turn in sample.earlier:
            return  # the same turn, or the same conversation going on: not another task
        if client.candidate is not None and client.candidate.words(sample.words) is not None:
            client.template = client.candidate  # a third task fits what two taught: adopted
        client.candidate = learn(client.words, sample.words) or client.candidate
        client.context = client.earlier & sample.earlier
        client.words, client.turn, client.earlier = sample.words, sample.turn, sample.earlier

    def _put(self, key: tuple[str, str], client: _Client) -> None:
        owner = key[0]
        if self._per_owner.get(owner, 0) >= self.per_key:  # this key's least recent app makes room
            oldest = next(k for k in self._clients if k[0] == owner)
            self._drop(oldest)
        self._clients[key] = client
        self._per_owner[owner] = self._per_owner.get(owner, 0) + 1
        while len(self._clients) > self.max_entries:
            self._drop(next(iter(self._clients)))

    def _drop(self, key: tuple[str, str]) -> None:
        del self._clients[key]
        left = self._per_owner[key[0]] - 1
        if left:
            self._per_owner[key[0]] = left
        else:
            del self._per_owner[key[0]]
