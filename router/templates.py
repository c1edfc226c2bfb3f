"""Each client's template, learned from its own traffic and kept per API key and client: the
state policies/template.py's diffing works on. Small by construction: at most `max_entries`
clients (least recently seen dropped first), each holding its last user turn (at most
`policies.template.KEPT` characters twice over: a longer turn is not learned from), the digests of
the user turns it sent before that one, and a template of at most KEPT characters.

A client is its API key with its system prompt (its numbers left out: a date, a count of files)
and the names of its tools: two agents behind one key have two templates. A template is adopted
once a third task has the same fixed parts as the two it was learned from (two questions that
happen to open alike teach nothing); a turn that does not fit it is read by the general rules.
Only a client's tasks are compared, one conversation's later turns never (a request holding the
last task's turn is that conversation going on). Recurring context turns -- the same user turn,
numbers aside, before the user's words in two tasks -- are learned alongside.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from backends.types import Message, content_text
from policies.template import KEPT, Learned, Template, digest, learn

__all__ = ["Templates"]

_SYSTEM_ROLES = ("system", "developer")
_CONTEXT_TURNS = 8  # earlier user turns of a request whose digests are compared


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
