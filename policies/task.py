"""The user's task in a conversation, with what the client wrapped around it set aside. Pure:
messages in, a Task out.

Agents wrap the user's words in a harness: a system prompt, tool schemas, environment and
reminder blocks, AGENTS.md instructions, the files in the chat, format rules added to every
turn, tool calls and their results. The harness is the same for an easy task and a hard one, so
it says nothing about which model the task needs; scored with the task, it drowns it (aider's
format rules make "hi" score like a proof). `read_task` finds the user's own words of the first
and of the latest user turn of a conversation in the router's message form (chat format: the
server's dialects translate Messages, Responses and Gemini's contents into it), and the
conversation between the user and the model without the harness (the user's words and the
model's plain answers). What a call is scored by, plain or in a session, is `scored_text`: the
latest user words alone.

Evidence before setting anything aside. Set aside by role: system messages (developer messages
arrive as system), tool results, assistant turns that call tools. Set aside within user turns:
what the request shows to be the client's (policies/harness.py: known clients' shapes always;
what the system prompt repeats or declares; in a client's request -- one with a system prompt or
tool schemas -- tagged blocks and the general rules of policies/wrappers.py). Set aside as
whole turns: what known clients write as whole turns (policies/shapes.py: aider's example
conversation, its turns about the files in the chat, its system prompt sent as the first user
turn, known as one when a later turn ends as it does), and in a client's request an environment
report answered by a short scripted reply, then more user turns (a context turn). A person's
bare conversation is read as typed. A client's template learned from its own traffic
(`learned`, policies/template.py) is applied to the words the structure leaves, and to nothing
else: the blocks and fields the request shows are read around it as on a first request.

The user's words are never dropped: when no user turn has words of its own, the latest user
turn is scored whole, as sent, and `Task.harness_only` says so.

Cost: reading a task is bounded whatever the conversation's length. The latest turn is found
from the end, the first from the start; the context kept is at most `HISTORY_KEPT` turns, looked
for among the `WINDOW` messages before the latest turn; system prompts are looked for among the
first and last `EDGE` messages. `Task.set_aside` (for `--explain` and the web view) is the one
full pass, made only when asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from backends.types import Message, content_text
from policies.declared import Declared
from policies.harness import (
    BARE,
    FOLDED_REPEAT_MIN,
    KINDS,
    KNOWN,
    Aside,
    Evidence,
    Shapes,
    chars,
    client_turn,
    end_key,
    own_words,
    repeated_end,
    tail,
)
from policies.template import Learned
from policies.wrappers import context_like

__all__ = ["EDGE", "HISTORY_KEPT", "KINDS", "KNOWN", "WINDOW", "Aside", "Shapes", "Task", "read_task", "scored_text"]

HISTORY_KEPT = 64  # earlier turns kept in Task.messages (the conversation without its harness)
WINDOW = 256  # messages before the latest user turn looked at for them
EDGE = 16  # messages at each end of a conversation looked at for its system prompts
_SCRIPTED_REPLY = 120  # characters: a reply to context is an acknowledgement, not an answer
_EXAMPLES_WITHIN = 32  # messages from the start within which aider's example conversation closes
_SYSTEM_ROLES = frozenset({"system", "developer"})


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Task:
    """What a conversation asks. `first`, `latest`: the user's own words of its first and of its
    latest user turn (the same turn when there is one; `latest` is what is scored). `messages`:
    the conversation between the user and the model before the latest turn (the user's words and
    the model's plain answers, the last `HISTORY_KEPT` of them), then the latest turn.
    `harness_only`: no user turn had words of its own, so the latest user turn is scored whole."""

    first: str
    latest: str
    messages: list[Message]
    harness_only: bool = False
    tools: Any = field(default=None, repr=False, compare=False)  # the request's tool schemas
    conversation: list[Message] = field(default_factory=list, repr=False, compare=False)  # as given
    kept: bool = field(default=True, compare=False)  # whether `conversation` is still held
    chars: tuple[int, int] | None = field(default=None, compare=False)  # (first, latest) when forgotten
    reading: tuple[Shapes, Learned | None] = field(default=(KNOWN, None), repr=False, compare=False)  # read with
    at: int = field(default=-1, compare=False)  # the message `latest` was read from (-1: scored whole)
    structural: str | None = field(default=None, compare=False)  # the latest words, unstripped, before a learned template

    def forgotten(self) -> Task:
        """This task without the texts it was read from, their lengths kept (what a list of past
        requests holds: an agent's conversation is often hundreds of kilobytes); what was set
        aside is then unknown, not empty."""
        return replace(self, first="", latest="", messages=[], conversation=[], tools=None, kept=False,
                       reading=(KNOWN, None), structural=None,
                       chars=self.chars or (len(self.first), len(self.latest)))

    @property
    def words(self) -> str:
        """The latest turn's words as the request's own structure reads them, before any template
        learned from the client's traffic (what that learning compares between tasks)."""
        return self.latest if self.structural is None else self.structural

    def _lengths(self) -> tuple[int, int]:
        return self.chars or (len(self.first), len(self.latest))

    @property
    def set_aside(self) -> tuple[Aside, ...]:
        """Every piece set aside, message by message: one pass over the whole conversation,
        made each time it is asked for (deciding needs none of it)."""
        return _Reading(self.conversation, *self.reading, self.tools).set_aside()

    def set_aside_chars(self) -> dict[str, int]:
        """Characters set aside per kind, largest first (the tool schemas as their JSON text)."""
        kinds: dict[str, int] = {}
        for piece in self.set_aside:
            kinds[piece.kind] = kinds.get(piece.kind, 0) + piece.chars
        if self.tools:
            kinds["tools"] = len(json.dumps(self.tools, ensure_ascii=False, separators=(",", ":"), default=str))
        return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))

    def explain(self) -> dict[str, Any]:
        """What was scored and what was set aside, for `--explain` and the web view."""
        first, latest = self._lengths()
        return {"scored_chars": latest, "first_chars": first,
                "set_aside": self.set_aside_chars() if self.kept else None, "harness_only": self.harness_only}

    def describe(self) -> str:
        """The same in a line: "scored 2 characters of the user's words; set aside: system 6649,
        format_rules 3058, files 326"."""
        latest = self._lengths()[1]
        scored = (f"scored the latest user turn whole ({latest} characters): no words of the user's "
                  "found outside the client's harness" if self.harness_only
                  else f"scored {latest} characters of the user's words")
        if not self.kept:
            return f"{scored}; what was set aside is no longer kept"
        kinds = self.set_aside_chars()
        aside = ", ".join(f"{kind} {n}" for kind, n in kinds.items())
        if "learned" in kinds:  # the one piece no rule of the request itself showed: say where it came from
            aside += " (learned: what this client's earlier answered tasks repeat around the user's words)"
        return f"{scored}; set aside: {aside}" if aside else scored


def scored_text(task: Task) -> str:
    """What a call is scored by, plain or in a session: the user's own words of the latest turn
    that has them (the latest user turn whole when none has: `Task.harness_only`). The earlier
    turns are not scored with it: a conversation's length says nothing of its task, and a
    session carries what earlier turns needed in its tier (router/sessions.py)."""
    return task.latest


def read_task(messages: list[Message], tools: Any = None, shapes: Shapes = KNOWN,
              learned: Learned | None = None) -> Task:
    """The task of a conversation in chat format (see the module docstring). `tools`: the
    request's tool schemas, if any, named in what was set aside; `shapes`: what known clients
    write (policies/shapes.py; the benchmark reads a client with its own entry left out);
    `learned`: what this client's own traffic taught (policies/template.py), applied to the
    words the request's structure leaves."""
    if len(messages) == 1 and messages[0].get("role") == "user" and not tools:  # a person's bare prompt
        text = content_text(messages[0].get("content"))
        if not _known_shape_possible(text, shapes):
            return Task(text.strip(), text.strip(), [{"role": "user", "content": text}], False, tools, messages)
    return _Reading(messages, shapes, learned, tools).task(tools)


def _known_shape_possible(text: str, shapes: Shapes) -> bool:
    """Whether a known client's shape may be in a bare prompt: a tag, a whole turn it writes, or
    its template's opening (only those are read in a person's turn, policies/harness.py)."""
    return "<" in text or text.startswith(shapes.openings) or client_turn(text, shapes) is not None


# -- the conversation ---------------------------------------------------------------------------------


def _examples_end(messages: list[Message], shapes: Shapes) -> int:
    """The index after a known client's example conversation (aider's closing "I switched to a
    new code base" turn and the "Ok." answering it), or 0 when there is none."""
    if not shapes.examples_closing:
        return 0
    for i, m in enumerate(messages[:_EXAMPLES_WITHIN]):
        content = m.get("content")
        if isinstance(content, str) and content.startswith(shapes.examples_closing) and m.get("role") == "user":
            answered = i + 1 < len(messages) and messages[i + 1].get("role") == "assistant"
            return i + 1 + answered
    return 0


def _near_edges(messages: list[Message]) -> range | list[int]:
    """The first and the last EDGE messages: where a conversation's system prompts are looked for."""
    return range(len(messages)) if len(messages) <= 2 * EDGE else [*range(EDGE), *range(len(messages) - EDGE,
                                                                                      len(messages))]


def _folded_system(messages: list[Message], shapes: Shapes) -> bool:
    """Whether the first message is a system prompt sent as a user turn: it opens as a known
    client's does (aider's), or the next user turn or the latest ends as it does."""
    first = content_text(messages[0].get("content"))
    head = first.split("\n", 1)[1] if "\n" in first[:80] else ""
    if shapes.folded and (first.startswith(shapes.folded) or head.startswith(shapes.folded)):
        return True
    for i in _later_users(messages):
        text = content_text(messages[i].get("content"))
        if len(text) - repeated_end(text, first) >= FOLDED_REPEAT_MIN:
            return True
    return False


def _later_users(messages: list[Message]) -> set[int]:
    """The user turns after the first among the first EDGE messages, and the latest."""
    near = {i for i in range(1, min(len(messages), EDGE)) if messages[i].get("role") == "user"}
    latest = next((i for i in range(len(messages) - 1, 0, -1) if messages[i].get("role") == "user"), None)
    return near | ({latest} if latest is not None else set())


def _tool_call_chars(message: Message) -> int:
    calls = message.get("tool_calls") or ()
    return chars(message.get("content")) + sum(len(str((c.get("function") or {}).get("arguments") or ""))
                                                for c in calls if isinstance(c, dict))


def _set_aside(message: Message, role: Any, index: int, aside: list[Aside]) -> None:
    """A message no user wrote: a system prompt, a tool call, a tool result (or a role no
    protocol the router speaks has)."""
    if role in _SYSTEM_ROLES:
        aside.append(Aside("system", chars(message.get("content")), index))
    elif role == "tool" or role == "function":
        aside.append(Aside("tool_results", chars(message.get("content")), index))
    elif role == "assistant":
        aside.append(Aside("tool_calls", _tool_call_chars(message), index))
    else:
        aside.append(Aside("other", chars(message.get("content")), index))


def _answer(message: Message, index: int) -> tuple[int, Message] | None:
    """A plain answer of the model's, kept as its text (None when it has none)."""
    text = content_text(message.get("content"))
    return (index, {"role": "assistant", "content": text}) if text else None


class _Reading:
    """A conversation being read: the user's words of a turn are read once, when first needed."""

    def __init__(self, messages: list[Message], shapes: Shapes = KNOWN, learned: Learned | None = None,
                 tools: Any = None) -> None:
        self.messages = messages
        self.shapes = shapes
        self.learned = learned
        self.skip = _examples_end(messages, shapes)
        near = _near_edges(messages)
        systems = [i for i in near if messages[i].get("role") in _SYSTEM_ROLES]
        sources = [(end, end_key(end)) for end in (tail(messages[i].get("content")) for i in systems)]
        self.folded = (not sources and len(messages) > 1 and messages[0].get("role") == "user"
                       and not shapes.typed and _folded_system(messages, shapes))
        if self.folded:
            end = tail(messages[0].get("content"))
            sources, systems = [(end, end_key(end))], [0]
        harness = (bool(sources) or bool(tools) or self.skip > 0) and not shapes.typed
        self.evidence = (Evidence(harness, sources, Declared(lambda: [content_text(messages[i].get("content"))
                                                                      for i in systems]))
                         if harness else BARE)
        self.turns: dict[int, tuple[str, list[Aside]]] = {}
        self.structural: dict[int, str] = {}  # a turn's words before the learned template, where one applied

    def turn(self, index: int) -> tuple[str, list[Aside]]:
        """(the user's words of user turn `index`, what the client wrote into it)."""
        if index not in self.turns:
            aside: list[Aside] = []
            content = self.messages[index].get("content")
            if self.folded and index == 0:
                self.turns[index] = "", [Aside("system", chars(content), index)]
            elif self.learned is not None and self.learned.context_turn(content_text(content)):
                self.turns[index] = "", [Aside("context", chars(content), index)]  # sent with every task
            elif self._context_turn(index):
                self.turns[index] = "", [Aside("context", chars(content), index)]
            else:
                after = index > 0 and self.messages[index - 1].get("role") == "assistant"
                words = own_words(content, index, self.evidence, aside, self.shapes, after)
                words = (self._templated(index, words, aside) if words
                         else self._templated_whole(index, content_text(content), after, aside))
                self.turns[index] = words, aside
        return self.turns[index]

    def _templated_whole(self, index: int, text: str, after: bool, aside: list[Aside]) -> str:
        """The words of a turn the structure left nothing of (its blocks alone, none a query), as
        this client's template learned from its traffic holds them, read again by the structure
        ("" when no template fits)."""
        if self.learned is None:
            return ""
        for template in self.learned.templates():
            inner = template.words(text)
            if inner is None:
                continue
            pieces = [Aside("learned", template.chars, index)]
            words = own_words(inner, index, self.evidence, pieces, self.shapes, after)
            if words.strip():
                self.structural[index] = text
                aside[:] = pieces
                return words
        return ""

    def _templated(self, index: int, words: str, aside: list[Aside]) -> str:
        """`words` less this client's template learned from its traffic, where they fit it."""
        learned = self.learned
        if learned is None or not words:
            return words
        for template in learned.templates():
            inner = template.words(words)
            if inner is not None:
                self.structural[index] = words
                aside.append(Aside("learned", template.chars, index))
                return inner
        return words

    def _context_turn(self, index: int) -> bool:
        """In a client's request, a user turn of context sent before the user's words: an
        environment report (date, folders, platform) answered by a short scripted reply, then
        more user turns."""
        messages = self.messages
        if not self.evidence.harness:
            return False
        if index + 2 >= len(messages) or messages[index + 1].get("role") != "assistant":
            return False
        reply = messages[index + 1]
        if reply.get("tool_calls") or chars(reply.get("content")) > _SCRIPTED_REPLY:
            return False
        return context_like(content_text(messages[index].get("content")))

    def task(self, tools: Any) -> Task:
        messages, turn = self.messages, self.turn
        latest = next((i for i in range(len(messages) - 1, self.skip - 1, -1)
                       if messages[i].get("role") == "user" and turn(i)[0]), None)
        if latest is None:
            return self._whole(tools)
        first = next(i for i in range(self.skip, latest + 1) if messages[i].get("role") == "user" and turn(i)[0])
        words = self.turn(latest)[0]
        context = self._context(first, latest)
        return Task(self.turn(first)[0].strip(), words.strip(), [*context, {"role": "user", "content": words}],
                    False, tools, messages, reading=(self.shapes, self.learned), at=latest,
                    structural=self.structural.get(latest, words))

    def _context(self, first: int, latest: int) -> list[Message]:
        """The turns before `latest` the scorer sees, oldest first: the user's words and the
        model's plain answers, from `first` on, at most HISTORY_KEPT of them among the WINDOW
        messages before it."""
        back: list[Message] = []
        answer: tuple[int, Message] | None = None  # a plain answer whose turn before it is not read yet
        for i in range(latest - 1, max(first, latest - WINDOW) - 1, -1):
            message = self.messages[i]
            role = message.get("role")
            if answer is not None and not self._scripted(i, role, answer[0]):
                back.append(answer[1])
            answer = None
            if role == "user" and self.turn(i)[0]:
                back.append({"role": "user", "content": self.turn(i)[0]})
            elif role == "assistant" and not message.get("tool_calls"):
                answer = _answer(message, i)
            if len(back) >= HISTORY_KEPT:
                return back[::-1]
        return ([answer[1]] if answer is not None else []) + back[::-1]

    def _scripted(self, index: int, role: Any, answered: int) -> bool:
        """Whether the answer at `answered` follows turn `index` the client wrote alone: the
        client's script then (aider's "Ok." after the files it adds)."""
        if role != "user" or index + 1 != answered:
            return False
        words, aside = self.turn(index)
        return not words and bool(aside)

    def _whole(self, tools: Any) -> Task:
        """No user turn with words of its own: the latest user turn, whole (else the latest
        message), so that nothing the user may have written goes unscored."""
        messages = self.messages
        users = [m for m in messages[self.skip:] if m.get("role") == "user"] or messages[-1:]
        first = content_text(users[0].get("content")) if users else ""
        latest = content_text(users[-1].get("content")) if users else ""
        return Task(first, latest, [{"role": "user", "content": latest}], bool(latest.strip()), tools, messages,
                    reading=(self.shapes, self.learned))

    def set_aside(self) -> tuple[Aside, ...]:
        """Every piece set aside, in order: the one full pass."""
        messages = self.messages
        aside = [Aside("system" if messages[i].get("role") in _SYSTEM_ROLES else "examples",
                       chars(messages[i].get("content")), i) for i in range(self.skip)]
        scripted: str | None = None  # the kind of the client's turn just read: its reply is the client's too
        for i in range(self.skip, len(messages)):
            after, scripted = scripted, None
            message = messages[i]
            role = message.get("role")
            if role == "user":
                words, pieces = self.turn(i)
                aside += pieces
                scripted = pieces[-1].kind if pieces and not words else None
            elif role == "assistant" and not message.get("tool_calls"):
                if after is not None:
                    aside.append(Aside(after, chars(message.get("content")), i))
            else:
                _set_aside(message, role, i, aside)
        return tuple(aside)
