"""The user's task, with what the client wrapped around it set aside. Pure: messages in, a Task out.

Agents wrap the user's words in a harness: a system prompt, tool schemas, environment and
reminder blocks, AGENTS.md instructions, the files in the chat, format rules added to every
turn, tool calls and their results. The harness is the same for an easy task and a hard one, so
it says nothing about which model the task needs; scored with the task, it drowns it (aider's
format rules make "hi" score like a proof). `read_task` finds the user's own words of the first
and of the latest user turn of a conversation in the router's message form (chat format: the
server's dialects translate Messages and Responses into it), and says what it set aside.

What is set aside, by structure where there is one:
- by role: system messages (developer messages arrive as system), tool results, and assistant
  turns that call tools;
- blocks a client writes as whole lines of a user turn, known by their tag: the open tag at a
  line's start, its closing tag at a line's end (`_BLOCKS`: Codex's `<environment_context>` and
  `# AGENTS.md instructions for ...` with its `<INSTRUCTIONS>`, Claude Code's `<system-reminder>`);
- the end of a user turn that repeats the end of the system prompt, from a line's start (aider
  writes its format rules at the end of its system prompt and again after the user's latest
  words); where a client folds its system prompt into the first user turn, that turn is its
  system prompt when a later turn ends as it does;
- whole turns a client writes in the user's name (aider's example conversation and its "I have
  *added these files to the chat*" turns), with the scripted assistant reply that follows each.
The known shapes come from the recorded client corpus (tests/data/clients) and the clients'
own sources, never from the prompts of any routing data: an unknown tag, a known one without
its closing tag, and a known one that relays what the user wrote (Claude Code's reminder of a
message sent while it worked) are the user's text.

The user's words are never dropped: when no user turn has words of its own, the latest user
turn is scored whole, as sent, and `Task.harness_only` says so.

Cost: each user turn is read once by one regular expression (in C) for its tags and compared
by a few slices with the system prompt's end; system prompts, tool schemas and results are
only measured (`len`), never read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from backends.types import Message, content_text

__all__ = ["KINDS", "Aside", "Task", "read_task"]

KINDS = ("system", "tools", "environment", "reminder", "instructions", "format_rules", "examples", "files",
         "client_note", "command_output", "tool_calls", "tool_results", "other")

# Tag -> kind of the blocks clients write as user text. Codex 0.171: codex-rs
# core/src/context (its "contextual user fragments") and the developer messages of the corpus;
# Claude Code 2.1.197: the tags its binary writes into user turns. Left out on purpose: tags
# that wrap what the user typed (Claude Code's <command-args>, <bash-input>, <user-memory-input>;
# its hooks' output, which it tells the model to treat as the user's).
_BLOCKS: dict[str, str] = {
    "environment_context": "environment",
    "user_instructions": "instructions",
    "INSTRUCTIONS": "instructions",  # AGENTS.md, after its "# AGENTS.md instructions for DIR" line
    "skills_instructions": "instructions",
    "skill": "instructions",
    "permissions instructions": "instructions",
    "apps_instructions": "instructions",
    "plugins_instructions": "instructions",
    "collaboration_mode": "instructions",
    "user_shell_command": "command_output",
    "turn_aborted": "client_note",
    "subagent_notification": "client_note",
    "hook_prompt": "client_note",
    "system-reminder": "reminder",
    "new-diagnostics": "reminder",
    "task-notification": "client_note",
    "local-command-caveat": "client_note",
    "local-command-stdout": "command_output",
    "local-command-stderr": "command_output",
    "bash-stdout": "command_output",
    "bash-stderr": "command_output",
}
# Blocks that relay what a person wrote (Claude Code 2.1.197 wraps a message the user sends
# while it works in a <system-reminder>): kept, as the user's words they are.
_RELAYED = ("The user sent a new message while you were working:",
            "A message arrived in the bound thread while you were working:",
            "Messages arrived in the bound thread while you were working:")
_OPEN = re.compile("<(" + "|".join(map(re.escape, sorted(_BLOCKS, key=len, reverse=True))) + r")(?:[ \t][^<>\n]*)?>")
_AGENTS_MD = "# AGENTS.md instructions for "

# Whole user turns aider 0.86 writes in the user's name (aider/coders/*_prompts.py,
# base_coder.py), by their opening words; each is followed by a scripted assistant reply.
_CLIENT_TURNS: dict[str, str] = {
    "I have *added these files to the chat* so you": "files",
    "These files have been *added these files to the chat*": "files",
    "Here are summaries of some files present in my git repository.": "files",
    "I am working with you on code in a git repository.\nHere are summaries": "files",
    "Here are some READ ONLY files, provided for your reference.": "files",
    "I am not sharing any files that you can edit yet.": "files",
    "I am not sharing the full contents of any files with you yet.": "files",
    "Don't try and edit any existing code without asking me to add the files to the chat!": "files",
    "I committed the changes with git hash ": "client_note",
    "I switched to a new code base. Please don't consider the above files": "examples",
}
_CLIENT_TURN_STARTS = tuple(_CLIENT_TURNS)
_EXAMPLES_CLOSING = next(start for start, kind in _CLIENT_TURNS.items() if kind == "examples")
_CLIENT_TURNS_EXACT = {"I updated the files.": "client_note", "I edited the files myself.": "client_note",
                       "I didn't see any properly formatted edits in your reply?!": "client_note"}
# aider's system prompt folded into the first user turn (for models without a system role),
# after at most one line of the model's own prefix ("Formatting re-enabled.").
_FOLDED_SYSTEM_STARTS = ("Act as an expert software developer.\nAlways use best practices when coding.",
                         "Act as an expert code analyst.\nAnswer questions about the supplied code.",
                         "Act as an expert architect engineer and provide direction to your editor engineer.")
_REPEAT_MIN = 16  # characters of a repeated system-prompt end worth setting aside; shorter is chance
_FOLDED_REPEAT_MIN = 64  # ... to call a first user turn a folded system prompt


class Aside(NamedTuple):
    """One piece set aside: its kind (one of KINDS), its characters, and the index of the
    message it came from."""

    kind: str
    chars: int
    message: int


@dataclass(frozen=True, slots=True)
class Task:
    """What a conversation asks. `first`, `latest`: the user's own words of its first and of its
    latest user turn (the same turn when there is one). `messages`: what the scorer should see
    -- the conversation between the user and the model up to the latest turn (the user's words
    and the model's plain answers), the latest turn last. `set_aside`: what was not scored.
    `harness_only`: no user turn had words of its own, so the latest user turn is scored whole."""

    first: str
    latest: str
    messages: list[Message]
    set_aside: tuple[Aside, ...] = ()
    harness_only: bool = False
    tools: Any = field(default=None, repr=False)  # the request's tool schemas, measured only when explained

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
        return {"scored_chars": len(self.latest), "first_chars": len(self.first),
                "set_aside": self.set_aside_chars(), "harness_only": self.harness_only}

    def describe(self) -> str:
        """The same in a line: "scored 2 characters of the user's words; set aside: system 6649,
        format_rules 3058, files 326"."""
        scored = (f"scored the latest user turn whole ({len(self.latest)} characters): no words of the user's "
                  "found outside the client's harness" if self.harness_only
                  else f"scored {len(self.latest)} characters of the user's words")
        aside = ", ".join(f"{kind} {chars}" for kind, chars in self.set_aside_chars().items())
        return f"{scored}; set aside: {aside}" if aside else scored


# -- one user turn ----------------------------------------------------------------------------------


def _chars(content: Any) -> int:
    """Characters of a message's text, as `content_text` would join it, without joining it."""
    if isinstance(content, str):
        return len(content)
    lengths = [len(p.get("text") or "") for p in content or () if isinstance(p, dict) and p.get("type") == "text"]
    return sum(lengths) + max(0, len(lengths) - 1)


def _tail(content: Any) -> str:
    """The text a message ends with: its last text part, or its string (what is compared with
    user turns; joining a long system prompt's parts would copy it for nothing)."""
    if isinstance(content, str):
        return content
    for part in reversed(content or ()):
        if isinstance(part, dict) and part.get("type") == "text":
            return part.get("text") or ""
    return ""


def _shared_end(t: str, s: str) -> int:
    """How many characters `t` and `s` end with alike, at least _REPEAT_MIN (the caller checked
    those). Found by halving (a shared end of k characters means every shorter one is shared
    too), each step comparing only the part not yet known to be shared."""
    lo, hi = _REPEAT_MIN, min(len(t), len(s))  # lo: known shared; hi: the most there can be
    if t[-hi:-lo] == s[-hi:-lo]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if t[-mid:-lo] == s[-mid:-lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _end_key(text: str) -> str:
    """The last _REPEAT_MIN characters of `text` less its trailing whitespace: two texts can
    share an end worth setting aside only if these are equal."""
    return text[-_REPEAT_MIN - 256:].rstrip()[-_REPEAT_MIN:]


def _repeated_end(text: str, source: str) -> int:
    """Where the end `text` shares with `source` starts, at a line's start (never inside a line
    of the user's); len(text) if they share less than _REPEAT_MIN characters. Both are read
    without trailing whitespace."""
    t = text.rstrip()
    s = source[-len(t) - 256:].rstrip()  # no more of a long system prompt than can be shared
    if len(t) < _REPEAT_MIN or len(s) < _REPEAT_MIN or t[-_REPEAT_MIN:] != s[-_REPEAT_MIN:]:
        return len(text)
    cut = len(t) - _shared_end(t, s)
    if cut > 0 and t[cut - 1] != "\n":
        cut = t.find("\n", cut) + 1 or len(t)
    return cut if len(t) - cut >= _REPEAT_MIN else len(text)


def _line_start(text: str, at: int) -> int:
    """The start of `at`'s line when only blanks precede `at` on it, else -1."""
    start = text.rfind("\n", 0, at) + 1
    return start if not text[start:at].strip(" \t") else -1


def _block_start(text: str, tag: str, at: int) -> int:
    start = _line_start(text, at)
    if start > 0 and tag == "INSTRUCTIONS":  # Codex heads AGENTS.md with a line naming the folder
        head = text.rfind(_AGENTS_MD, 0, start)
        if head >= 0 and (head == 0 or text[head - 1] == "\n") and not text[text.find("\n", head):start].strip():
            return head
    return start


def _blocks(text: str) -> list[tuple[int, int, str]]:
    """The known blocks of `text` as (start, end, kind): whole lines, each with its closing tag."""
    found = []
    pos = 0
    while (match := _OPEN.search(text, pos)) is not None:
        tag = match.group(1)
        pos = match.end()
        start = _block_start(text, tag, match.start())
        close = text.find(f"</{tag}>", pos)
        if start < 0 or close < 0 or text[pos:pos + 80].lstrip().startswith(_RELAYED):
            continue
        end = close + len(tag) + 3
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end + 1
        if text[end:line_end].strip():
            continue
        end = line_end  # the close tag's line is the block's
        found.append((start, end, _BLOCKS[tag]))
        pos = end
    return found


def _without_blocks(text: str, index: int, aside: list[Aside]) -> str:
    """`text` less its known blocks; the line breaks around a block are the client's, the rest
    of the user's text is kept as it is."""
    if "<" not in text and _AGENTS_MD not in text:
        return text
    blocks = _blocks(text)
    if not blocks:
        return text
    kept, last = [], 0
    for start, end, kind in blocks:
        aside.append(Aside(kind, end - start, index))
        kept.append(text[last:start].strip("\r\n"))
        last = end
    kept.append(text[last:].lstrip("\r\n"))
    return "\n\n".join(k for k in kept if k.strip())


def _parts_without_blocks(parts: Any, index: int, aside: list[Aside]) -> str:
    kept = (_without_blocks(p.get("text", ""), index, aside) for p in parts or ()
            if isinstance(p, dict) and p.get("type") == "text")
    return "\n".join(p for p in kept if p)


def _client_turn(text: str) -> str | None:
    """The kind of a whole user turn the client wrote in the user's name, else None."""
    if text in _CLIENT_TURNS_EXACT:
        return _CLIENT_TURNS_EXACT[text]
    if text.startswith(_CLIENT_TURN_STARTS):
        return next(kind for start, kind in _CLIENT_TURNS.items() if text.startswith(start))
    return None


def _without_repeat(words: str, index: int, sources: list[tuple[str, str]], aside: list[Aside]) -> str:
    """`words` less an end it shares with a system prompt's end (see `_repeated_end`)."""
    key = _end_key(words)
    for source, source_key in sources:
        if key != source_key:
            continue
        cut = _repeated_end(words, source)
        if cut < len(words):
            aside.append(Aside("format_rules", len(words) - cut, index))
            return words[:cut].rstrip()
    return words


def _own_words(content: Any, index: int, sources: list[tuple[str, str]], aside: list[Aside]) -> str:
    """The user's words of one user turn, with what the client wrote into it added to `aside`.
    Content parts are read one by one (Claude Code writes each reminder as a part of its own)
    and joined as `content_text` joins them. A string is cut of a repeated end first, so that
    blocks are looked for in the user's part of it only."""
    text = content_text(content)
    kind = _client_turn(text)
    if kind is not None:
        aside.append(Aside(kind, len(text), index))
        return ""
    if isinstance(content, str):
        return _without_blocks(_without_repeat(text, index, sources, aside), index, aside)
    return _without_repeat(_parts_without_blocks(content, index, aside), index, sources, aside)


# -- the conversation -------------------------------------------------------------------------------

_SYSTEM_ROLES = frozenset({"system", "developer"})


def _survey(messages: list[Message]) -> tuple[int, list[int], list[tuple[str, str]]]:
    """(the index after aider's example conversation -- its closing "I switched to a new code
    base" turn and the "Ok." answering it -- or 0; the later user turns' indices; the ends of
    the system messages, each with its `_end_key`), in one pass."""
    skip, users, sources = 0, list[int](), list[tuple[str, str]]()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "user":
            content = m.get("content")
            if isinstance(content, str) and content.startswith(_EXAMPLES_CLOSING):
                answered = i + 1 < len(messages) and messages[i + 1].get("role") == "assistant"
                skip, users = i + 1 + answered, []
            else:
                users.append(i)
        elif role in _SYSTEM_ROLES:
            tail = _tail(m.get("content"))
            sources.append((tail, _end_key(tail)))
    return skip, [i for i in users if i >= skip], sources


def _folded_system(messages: list[Message], users: list[int]) -> bool:
    """Whether the first message is a system prompt sent as a user turn (no system role)."""
    first = content_text(messages[0].get("content"))
    head = first.split("\n", 1)[1] if "\n" in first[:80] else ""
    if first.startswith(_FOLDED_SYSTEM_STARTS) or head.startswith(_FOLDED_SYSTEM_STARTS):
        return True
    for i in users[1:]:
        text = content_text(messages[i].get("content"))
        if len(text) - _repeated_end(text, first) >= _FOLDED_REPEAT_MIN:
            return True
    return False


def _set_aside(message: Message, role: Any, index: int, aside: list[Aside]) -> None:
    """A message no user wrote: a system prompt, a tool call, a tool result (or a role no
    protocol the router speaks has)."""
    if role in _SYSTEM_ROLES:
        aside.append(Aside("system", _chars(message.get("content")), index))
    elif role == "tool" or role == "function":
        aside.append(Aside("tool_results", _chars(message.get("content")), index))
    elif role == "assistant":
        calls = sum(len(str((c.get("function") or {}).get("arguments") or "")) for c in message["tool_calls"]
                    if isinstance(c, dict))
        aside.append(Aside("tool_calls", _chars(message.get("content")) + calls, index))
    else:
        aside.append(Aside("other", _chars(message.get("content")), index))


class _Reading:
    """One pass over a conversation: what is set aside, and the user's turns and the model's
    plain answers kept for the scorer."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.skip, users, self.sources = _survey(messages)
        self.aside = [Aside("system" if messages[i].get("role") in _SYSTEM_ROLES else "examples",
                            _chars(messages[i].get("content")), i) for i in range(self.skip)]
        self.folded = not self.sources and len(users) > 1 and users[0] == 0 and _folded_system(messages, users)
        if self.folded:
            tail = _tail(messages[0].get("content"))
            self.sources = [(tail, _end_key(tail))]
        self.kept: list[Message] = []
        self.words_at: list[int] = []  # indices in `kept` of user turns with words
        self.scripted: str | None = None  # kind of the client's user turn just read: its reply is the client's too

    def read(self, tools: Any) -> Task:
        for i in range(self.skip, len(self.messages)):
            after, self.scripted = self.scripted, None
            message = self.messages[i]
            role = message.get("role")
            if role == "user":
                self._user(message, i)
            elif role == "assistant" and not message.get("tool_calls"):
                self._answer(message, i, after)
            else:
                _set_aside(message, role, i, self.aside)
        if not self.words_at:
            return _whole(self.messages, self.aside, tools)
        kept, at = self.kept, self.words_at
        first, latest = kept[at[0]]["content"].strip(), kept[at[-1]]["content"].strip()
        return Task(first, latest, kept[:at[-1] + 1], tuple(self.aside), False, tools)

    def _answer(self, message: Message, index: int, after: str | None) -> None:
        text = content_text(message.get("content"))
        if after is not None:
            self.aside.append(Aside(after, len(text), index))
        elif text and self.words_at:
            self.kept.append({"role": "assistant", "content": text})

    def _user(self, message: Message, index: int) -> None:
        if self.folded and index == 0:
            self.aside.append(Aside("system", _chars(message.get("content")), index))
            self.scripted = "system"
            return
        before = len(self.aside)
        words = _own_words(message.get("content"), index, self.sources, self.aside)
        if words:
            self.words_at.append(len(self.kept))
            self.kept.append({"role": "user", "content": words})
        elif len(self.aside) > before:
            self.scripted = self.aside[-1].kind


def read_task(messages: list[Message], tools: Any = None) -> Task:
    """The task of a conversation in chat format (see the module docstring). `tools`: the
    request's tool schemas, if any, named in what was set aside."""
    if len(messages) == 1 and messages[0].get("role") == "user":  # a bare prompt: nothing to compare it with
        text = content_text(messages[0].get("content"))
        if "<" not in text and _AGENTS_MD not in text and _client_turn(text) is None:
            return Task(text.strip(), text.strip(), [{"role": "user", "content": text}], (), False, tools)
    return _Reading(messages).read(tools)


def _whole(messages: list[Message], aside: list[Aside], tools: Any) -> Task:
    """No user turn with words of its own: the latest user turn, whole (else the latest
    message), so that nothing the user may have written goes unscored."""
    users = [m for m in messages if m.get("role") == "user"] or messages[-1:]
    first = content_text(users[0].get("content")) if users else ""
    latest = content_text(users[-1].get("content")) if users else ""
    return Task(first, latest, [{"role": "user", "content": latest}], tuple(aside), bool(latest.strip()), tools)
