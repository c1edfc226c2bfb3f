"""The client's harness in one user turn, and the user's words with it set aside. Pure: text
in, text out; used by policies/task.py, which reads the conversation.

Evidence before setting anything aside: a turn is the user's as typed unless the request shows a
part of it to be the client's. What shows it, and what each piece of evidence lets the reader
set aside (`Evidence`):
- always, what known clients are known to write (policies/shapes.py: their tags, their whole
  turns, their templates) -- a client's shape is evidence whoever sends it;
- with a system prompt: an end that repeats the end of the system prompt, from a line's start
  (aider writes its format rules at the end of its system prompt and again after the user's
  latest words), and the fields and labels the system prompt declares (policies/declared.py:
  dspy's field markers, a ReAct format's "Observation:");
- with a harness (a system prompt or tool schemas: a client's request, not a person's bare
  turn): tagged blocks of any tag name, written as whole lines -- the open tag at a line's
  start, its closing tag at a line's end, a heading line just before it included (Codex heads
  AGENTS.md so; Gemini CLI sends `<session_context>`; IDE agents attach files and selections);
  when nothing but such blocks is left, the user's words are those of the last block whose tag
  names a query (an IDE agent's `<user_query>`); an environment part before the words, and a
  quoted task with an environment after it (policies/wrappers.py).
A person's bare turn (no system prompt, no tools) is read by the first kind alone: a user who
pastes a page, a config or an issue with its own tags, headings and lists is scored on all of it.
Kept as the user's text everywhere: a block not written as whole lines, one never closed, one of
HTML's elements (a user pasting a page), and one that relays what the user wrote.

Cost: a turn is searched once by one regular expression (in C) for its tags, and its end is
compared with a system prompt's by a 16-character key, then by halving; a system prompt is
never read beyond its last few kilobytes unless a rule of policies/declared.py asks for it.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any, NamedTuple

from backends.types import content_text
from policies.declared import QUERY_NAME, Declared, field_words
from policies.shapes import KNOWN, Shapes
from policies.wrappers import context_like, follow_up, quoted_task

__all__ = ["AGENTS_MD", "BARE", "FOLDED_REPEAT_MIN", "KINDS", "KNOWN", "Aside", "Evidence", "Shapes", "chars",
           "client_turn", "end_key", "own_words", "repeated_end", "tail"]

KINDS = ("system", "tools", "environment", "reminder", "instructions", "format_rules", "examples", "files",
         "client_note", "command_output", "context", "template", "learned", "tool_calls", "tool_results", "other")

# Any tag, as an element or a name with spaces (Codex's <permissions instructions>), at a line's start.
_OPEN = re.compile(r"^[ \t]*<([A-Za-z][\w.:-]*(?: [A-Za-z][\w.:-]*)?)(?:[ \t][^<>\n]*)?>", re.MULTILINE)
# HTML's elements: a user pasting a page or a snippet writes these; a client's blocks are its own names.
_HTML = frozenset(("html head body div span p pre code table thead tbody tr td th ul ol li a b i u em strong "
                   "script style template svg form input button label select option section article header "
                   "footer nav main aside h1 h2 h3 h4 h5 h6 img br hr blockquote details summary iframe "
                   "canvas video audio source link meta title textarea dl dt dd figure caption").split())
AGENTS_MD = "# AGENTS.md instructions for "
_REPEAT_MIN = 16  # characters of a repeated system-prompt end worth setting aside; shorter is chance
FOLDED_REPEAT_MIN = 64  # ... to call a first user turn a folded system prompt
_NESTED = 2  # blocks within a query's block read in turn, at most this deep


class Evidence(NamedTuple):
    """What a request shows of its client beyond the user's turn (see the module docstring):
    `harness`, a system prompt or tool schemas; `sources`, its system prompts' ends, each with
    its `end_key`; `declared`, what its system prompts declare."""

    harness: bool
    sources: list[tuple[str, str]]
    declared: Declared


BARE = Evidence(False, [], Declared(list))  # a person's turn: nothing but known clients' shapes is read in it


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


def _with_heading(text: str, start: int) -> int:
    """`start`, or the start of a markdown heading line just before it (blank lines between)
    that opens the text or follows a blank line: a block's title (Codex's "# AGENTS.md
    instructions for DIR") is the block's."""
    before = text[:start].rstrip()
    head = before.rfind("\n") + 1
    if not before or not before[head:].startswith("#") or (head and text[head - 2:head] != "\n\n"):
        return start
    return head


class _Block(NamedTuple):
    start: int
    end: int
    kind: str
    inner: str  # the text between the tags
    tag: str = ""


def _close(text: str, tag: str, pos: int) -> int:
    """Where `tag`'s closing tag starts after `pos` (it may carry the opening's words: Codex
    closes <permissions instructions> so), else -1."""
    close = text.find(f"</{tag}", pos)
    while close >= 0:
        after = text[close + len(tag) + 2:close + len(tag) + 120]
        if after.startswith(">") or (after[:1] == " " and ">" in after and "<" not in after.split(">", 1)[0]):
            return close
        close = text.find(f"</{tag}", close + 1)
    return -1


def _blocks(text: str, shapes: Shapes, harness: bool) -> list[_Block]:
    """The blocks of `text` a client wrote: whole lines, each with its closing tag (a tag no
    known client writes only in a client's request, `harness`)."""
    found: list[_Block] = []
    pos = 0
    while (match := _OPEN.search(text, pos)) is not None:
        tag = match.group(1)
        if " " in tag and tag not in shapes.blocks:
            tag = tag.split(" ", 1)[0]
        pos = match.end()
        if tag.lower() in _HTML or tag in shapes.kept or (not harness and tag not in shapes.blocks):
            continue
        close = _close(text, tag, pos)
        if close < 0:
            continue
        end = text.find(">", close) + 1
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end + 1
        if text[end:line_end].strip() or text[pos:pos + 80].lstrip().startswith(shapes.relayed):
            pos = end  # the user's text, tags within it included
            continue
        start = _with_heading(text, match.start())
        found.append(_Block(start, line_end, shapes.blocks.get(tag, "context"), text[pos:close], tag))
        pos = line_end
    return found


def _query(block: _Block, shapes: Shapes) -> bool:
    """A block that holds the user's words when a turn is blocks alone: its tag names what a
    person asks (`<user_query>`, `<USER_REQUEST>`, `<task>`: how IDE agents mark the query after
    the context they attach) or is a known client's query tag, and it is neither empty nor an
    environment report. A tool's output a text agent reports in tags (`<output>`,
    `<returncode>`) is never read as words."""
    inner = block.inner.strip()
    if block.tag in shapes.queries:
        return bool(inner)
    return (block.kind == "context" and bool(inner) and QUERY_NAME.search(block.tag) is not None
            and not context_like(inner))


def _outside(text: str, blocks: list[_Block]) -> str:
    """The text between and around `blocks`, as paragraphs (the line breaks next to a block are
    the client's, so they go with it)."""
    kept, last = [], 0
    for block in blocks:
        kept.append(text[last:block.start].strip("\r\n"))
        last = block.end
    kept.append(text[last:].lstrip("\r\n"))
    return "\n\n".join(k for k in kept if k.strip())


def _set_blocks_aside(blocks: list[_Block], query: _Block | None, index: int, aside: list[Aside]) -> None:
    for block in blocks:
        if block is not query:
            aside.append(Aside(block.kind, block.end - block.start, index))
    if query is not None:  # its tags (and their line breaks) are the client's, its inner text the user's
        aside.append(Aside("context", query.end - query.start - len(query.inner.strip("\r\n")), index))


def _without_blocks(text: str, index: int, aside: list[Aside], shapes: Shapes, harness: bool, depth: int = 0) -> str:
    """`text` less its blocks; the line breaks around a block are the client's, the rest of the
    user's text is kept as it is. Blocks alone, the last that may hold the user's words
    (`_query`) is read as them (an agent's query after its attached context), its own blocks
    set aside in turn (Marvin nests the task's id and result type in its `<task>`)."""
    blocks = _blocks(text, shapes, harness) if "<" in text else []
    if not blocks:
        return text
    words = _outside(text, blocks)
    query = next((b for b in reversed(blocks) if _query(b, shapes)), None) if not words else None
    _set_blocks_aside(blocks, query, index, aside)
    if query is None:
        return words
    # A nested block's lines carry the indentation of the client's markup, not the user's.
    inner = (textwrap.dedent(query.inner) if depth else query.inner).strip("\r\n")
    return _without_blocks(inner, index, aside, shapes, harness, depth + 1) if depth < _NESTED else inner


def client_turn(text: str, shapes: Shapes = KNOWN) -> str | None:
    """The kind of a whole user turn a known client wrote in the user's name, else None."""
    if text in shapes.exact:
        return shapes.exact[text]
    if shapes.turn_starts and text.startswith(shapes.turn_starts):
        return next(kind for start, kind in shapes.turns.items() if text.startswith(start))
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


def _known_template(text: str, shapes: Shapes) -> tuple[int, int] | None:
    """(start, end) of the user's words in a known client's template (policies/shapes.py:
    mini-swe-agent's `Please solve this issue: {task}` and its rules, LangChain's ReAct prompt)."""
    for opening, before, after in shapes.templates:
        if not text.startswith(opening):
            continue
        start = text.find(before, len(opening)) if before else len(opening)
        if start < 0:
            continue
        start += len(before)
        end = text.find(after, start) if after else len(text)
        if end > start:
            return start, end
    return None


def _template_opening(text: str, start: int, end: int, shapes: Shapes) -> int:
    """Where a known client's template opens at a line's start within text[start:end] (the next
    task's words after the output a client replays: smolagents' "Observation: ... New task:"),
    else `end`."""
    found = [at + 1 for opening, _, _ in shapes.templates
             if (at := text.find(f"\n{opening.lstrip()}", start, end)) >= 0]
    return min(found, default=end)


def _general(text: str, index: int, aside: list[Aside], after_answer: bool, evidence: Evidence,
             shapes: Shapes) -> str:
    """`text` less what the request shows around the user's words: in a client's request, a
    tool's output under a declared label (up to a known template's opening); a known client's
    template; the fields its system prompt declares; in a client's request, a quoted task and an
    environment after it."""
    if evidence.harness and after_answer and (at := follow_up(text, evidence.declared.label)) is not None:
        at = _template_opening(text, 0, at, shapes)
        aside.append(Aside("tool_results", at, index))
        text = text[at:].strip()
    template = _known_template(text, shapes)
    if template is not None:
        start, end = template
        aside.append(Aside("template", len(text) - (end - start), index))
        return text[start:end].rstrip()
    fields = evidence.declared.fields if evidence.sources else {}
    read = field_words(text, fields) if fields else None
    if read is not None:
        aside.append(Aside("template", read[1], index))
        return read[0]
    if not evidence.harness:
        return text
    quoted = quoted_task(text)
    if quoted is not None:
        start, end = quoted
        if len(text) - (end - start) > 2:
            aside.append(Aside("environment", len(text) - (end - start), index))
        return text[start:end]
    return text


def _text_parts(parts: Any) -> list[dict[str, Any]]:
    return [p for p in parts or () if isinstance(p, dict) and p.get("type") == "text"]


def _part_words(parts: Any, index: int, aside: list[Aside], shapes: Shapes, harness: bool) -> str:
    """The user's words of a turn sent as parts: each text part less its blocks; in a client's
    request, a part that is an environment report before the last part with words is context."""
    texts = [_without_blocks(p.get("text", ""), index, aside, shapes, harness) for p in _text_parts(parts)]
    worded = [i for i, t in enumerate(texts) if t.strip()] if harness else []
    for i in worded[:-1]:
        if context_like(texts[i]):
            aside.append(Aside("context", len(texts[i]), index))
            texts[i] = ""
    return "\n".join(t for t in texts if t)


def own_words(content: Any, index: int, evidence: Evidence, aside: list[Aside], shapes: Shapes = KNOWN,
              after_answer: bool = False) -> str:
    """The user's words of one user turn, with what the client wrote into it added to `aside`,
    as far as `evidence` shows it (see the module docstring). Content parts are read one by one
    (Claude Code writes each reminder as a part of its own) and joined as `content_text` joins
    them. A string is cut of a repeated end first, so that blocks are looked for in the user's
    part of it only. `after_answer`: the turn follows one of the model's (a tool's output may
    open it)."""
    text = content_text(content)
    kind = client_turn(text, shapes)
    if kind is not None:
        aside.append(Aside(kind, len(text), index))
        return ""
    if isinstance(content, str):
        words = _without_blocks(_without_repeat(text, index, evidence.sources, aside), index, aside, shapes,
                                evidence.harness)
    else:
        words = _without_repeat(_part_words(content, index, aside, shapes, evidence.harness), index,
                                evidence.sources, aside)
    return _general(words, index, aside, after_answer, evidence, shapes) if words else words
