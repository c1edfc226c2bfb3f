"""The client's harness in one user turn: the shapes clients are known to write around the
user's words, and the user's words with them set aside. Pure: text in, text out; used by
policies/task.py, which reads the conversation.

What one user turn may hold besides the user's words:
- blocks a client writes as whole lines, known by their tag: the open tag at a line's start,
  its closing tag at a line's end (`_BLOCKS`: Codex's `<environment_context>` and `# AGENTS.md
  instructions for ...` with its `<INSTRUCTIONS>`, Claude Code's `<system-reminder>`);
- an end that repeats the end of the system prompt, from a line's start (aider writes its
  format rules at the end of its system prompt and again after the user's latest words);
- the whole turn, written by the client in the user's name (aider's "I have *added these files
  to the chat*" turns, the close of its example conversation).
The shapes come from the recorded client corpus (tests/data/clients) and the clients' own
sources, never from the prompts of any routing data: an unknown tag, a known one without its
closing tag, and a known one that relays what the user wrote (Claude Code's reminder of a
message sent while it worked) are the user's text.

Cost: a turn is searched once by one regular expression (in C) for its tags, and its end is
compared with a system prompt's by a 16-character key, then by halving; a system prompt is
never read beyond its last few kilobytes.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from backends.types import content_text

__all__ = ["AGENTS_MD", "EXAMPLES_CLOSING", "FOLDED_REPEAT_MIN", "FOLDED_SYSTEM_STARTS", "KINDS", "Aside",
           "chars", "client_turn", "end_key", "own_words", "repeated_end", "tail"]

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
AGENTS_MD = "# AGENTS.md instructions for "

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
EXAMPLES_CLOSING = next(start for start, kind in _CLIENT_TURNS.items() if kind == "examples")
_CLIENT_TURNS_EXACT = {"I updated the files.": "client_note", "I edited the files myself.": "client_note",
                       "I didn't see any properly formatted edits in your reply?!": "client_note"}
# aider's system prompt folded into the first user turn (for models without a system role),
# after at most one line of the model's own prefix ("Formatting re-enabled.").
FOLDED_SYSTEM_STARTS = ("Act as an expert software developer.\nAlways use best practices when coding.",
                         "Act as an expert code analyst.\nAnswer questions about the supplied code.",
                         "Act as an expert architect engineer and provide direction to your editor engineer.")
_REPEAT_MIN = 16  # characters of a repeated system-prompt end worth setting aside; shorter is chance
FOLDED_REPEAT_MIN = 64  # ... to call a first user turn a folded system prompt


class Aside(NamedTuple):
    """One piece set aside: its kind (one of KINDS), its characters, and the index of the
    message it came from."""

    kind: str
    chars: int
    message: int


# -- one user turn ------------------------------------------------------------------------------------


def chars(content: Any) -> int:
    """Characters of a message's text, as `content_text` would join it, without joining it."""
    if isinstance(content, str):
        return len(content)
    lengths = [len(p.get("text") or "") for p in content or () if isinstance(p, dict) and p.get("type") == "text"]
    return sum(lengths) + max(0, len(lengths) - 1)


def tail(content: Any) -> str:
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


def end_key(text: str) -> str:
    """The last _REPEAT_MIN characters of `text` less its trailing whitespace: two texts can
    share an end worth setting aside only if these are equal."""
    return text[-_REPEAT_MIN - 256:].rstrip()[-_REPEAT_MIN:]


def repeated_end(text: str, source: str) -> int:
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
        head = text.rfind(AGENTS_MD, 0, start)
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
    if "<" not in text and AGENTS_MD not in text:
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


def client_turn(text: str) -> str | None:
    """The kind of a whole user turn the client wrote in the user's name, else None."""
    if text in _CLIENT_TURNS_EXACT:
        return _CLIENT_TURNS_EXACT[text]
    if text.startswith(_CLIENT_TURN_STARTS):
        return next(kind for start, kind in _CLIENT_TURNS.items() if text.startswith(start))
    return None


def _without_repeat(words: str, index: int, sources: list[tuple[str, str]], aside: list[Aside]) -> str:
    """`words` less an end it shares with a system prompt's end (see `repeated_end`)."""
    key = end_key(words)
    for source, source_key in sources:
        if key != source_key:
            continue
        cut = repeated_end(words, source)
        if cut < len(words):
            aside.append(Aside("format_rules", len(words) - cut, index))
            return words[:cut].rstrip()
    return words


def own_words(content: Any, index: int, sources: list[tuple[str, str]], aside: list[Aside]) -> str:
    """The user's words of one user turn, with what the client wrote into it added to `aside`.
    Content parts are read one by one (Claude Code writes each reminder as a part of its own)
    and joined as `content_text` joins them. A string is cut of a repeated end first, so that
    blocks are looked for in the user's part of it only."""
    text = content_text(content)
    kind = client_turn(text)
    if kind is not None:
        aside.append(Aside(kind, len(text), index))
        return ""
    if isinstance(content, str):
        return _without_blocks(_without_repeat(text, index, sources, aside), index, aside)
    return _without_repeat(_parts_without_blocks(content, index, aside), index, sources, aside)
